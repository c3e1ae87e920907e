package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
)

// A lease's ttl is at least api.MinLeaseTTL: shorter, it would end before its bind's answer
// is written (an ended lease bound again, review item 3). Refused at admission with the
// documented reason, before anything is recorded.
func TestLeaseTTLBelowTheMinimumIsRefused(t *testing.T) {
	for _, tc := range []struct {
		ttl  string
		want string // "" = accepted
	}{
		{"", ""},
		{api.MinLeaseTTL.String(), ""},
		{"1m", ""},
		{"2s", "ttl: \"2s\" is shorter than the minimum of 5s"},
		{"1s", "ttl: \"1s\" is shorter than the minimum of 5s"},
		{(api.MinLeaseTTL - time.Millisecond).String(), "is shorter than the minimum of 5s"},
		{"0s", "ttl: \"0s\" is not a positive duration"},
		{"-1h", "is not a positive duration"},
	} {
		err := ValidateLeaseRequest(api.LeaseRequest{Pool: "dev", TTL: tc.ttl})
		if tc.want == "" {
			assert.NoError(t, err, tc.ttl)
		} else {
			assert.ErrorContains(t, err, tc.want, tc.ttl)
		}
	}

	h := testServer(t).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/leases", strings.NewReader(`{"pool":"dev","ttl":"2s"}`)))
	require.Equal(t, 400, rec.Code, rec.Body.String())
	var body api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	assert.Equal(t, api.ReasonInvalidRequest, body.Reason)
	assert.Contains(t, body.Detail, "minimum of 5s")
}
