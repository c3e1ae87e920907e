package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func TestReport(t *testing.T) {
	var buf bytes.Buffer
	assert.Equal(t, 3, Report(&buf, &ExitError{Code: 3}))
	assert.Empty(t, buf.String(), "a silent exit prints nothing")

	assert.Equal(t, 125, Report(&buf, &ExitError{Code: 125, Err: errors.New("no lease")}))
	assert.Equal(t, "kobe: no lease\n", buf.String())

	buf.Reset()
	err := fmt.Errorf("lease from pool ci: %w", &api.Error{StatusCode: 429, Body: api.ErrorBody{Error: "Quota exhausted", Reason: api.ReasonQuotaExhausted, Detail: "3 of 3 leases for role ci"}})
	assert.Equal(t, 1, Report(&buf, err))
	assert.Equal(t, "kobe: lease from pool ci: Quota exhausted (HTTP 429, reason quota_exhausted): 3 of 3 leases for role ci\n"+
		"hint: your role's quota is used up: 3 of 3 leases for role ci (release a lease with `kobe lease release ID` — `kobe lease list` shows yours — or ask an admin for more)\n", buf.String())
}

func TestHints(t *testing.T) {
	apiErr := func(status int, reason api.ReasonCode) error {
		return &api.Error{StatusCode: status, Body: api.ErrorBody{Error: "x", Reason: reason}}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apiErr(401, api.ReasonUnauthorized), "set --token / KOBE_TOKEN or run `kobe dev` (it writes a context)"},
		{apiErr(401, ""), "set --token / KOBE_TOKEN"},
		{apiErr(403, api.ReasonForbidden), "role does not allow this"},
		{apiErr(503, api.ReasonPoolExhausted), "maxClusters"},
		{&api.Error{StatusCode: 429, Body: api.ErrorBody{Reason: api.ReasonRateLimited}, RetryAfter: 7 * time.Second}, "wait 7s"},
		{apiErr(404, api.ReasonNotFound), "kobe lease list"},
		{apiErr(409, api.ReasonMaxTTLCeiling), "maxTtl"},
		{apiErr(409, api.ReasonAliasTaken), "--name"},
		{apiErr(409, api.ReasonIdempotencyConflict), "--idempotency-key"},
		{&LeaseEndedError{Lease: api.Lease{ID: "l", Phase: "Failed", Reason: api.ReasonPoolExhausted}}, "maxClusters"},
		{apiErr(400, api.ReasonInvalidRequest), ""},
		{fmt.Errorf("cannot reach the kobe API at http://x: %w", syscall.ECONNREFUSED), "kobe dev"},
		{fmt.Errorf("temporal at t:7233: %w", syscall.ECONNREFUSED), ""},
		{errors.New("plain"), ""},
	} {
		if tc.want == "" {
			assert.Empty(t, Hint(tc.err), "%v", tc.err)
			continue
		}
		assert.Contains(t, Hint(tc.err), tc.want, "%v", tc.err)
	}
}

func TestTimeFormatting(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		12 * time.Second: "12s", 42 * time.Minute: "42m", 65 * time.Minute: "65m", 310 * time.Minute: "5h10m", 72 * time.Hour: "3d",
		-42 * time.Minute: "42m",
	} {
		assert.Equal(t, want, HumanDuration(d))
	}
	later, earlier := now.Add(42*time.Minute), now.Add(-3*time.Minute)
	assert.Equal(t, "in 42m", FormatTime(&later, true, now))
	assert.Equal(t, "3m ago", FormatTime(&earlier, true, now))
	assert.Equal(t, "2030-01-01T12:42:00Z", FormatTime(&later, false, now))
	assert.Equal(t, "-", FormatTime(nil, true, now))
}

func TestWaitForLeaseRetriesTransientFailures(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch n {
		case 1:
			fmt.Fprint(w, `{"id":"l1","phase":"Pending","pool":"ci","queue_position":2}`)
		case 2:
			w.WriteHeader(502) // a proxy in between
			fmt.Fprint(w, "bad gateway")
		default:
			fmt.Fprint(w, `{"id":"l1","phase":"Bound","pool":"ci","kubeconfig":"kc"}`)
		}
	}))
	defer srv.Close()
	c, err := api.NewClient(srv.URL)
	require.NoError(t, err)
	ios, _, _, errOut := iostreams.Test()
	ios.SetStderrTTY(true)
	l, err := WaitForLease(context.Background(), c, api.Lease{ID: "l1", Phase: "Pending", Pool: "ci"},
		WaitOptions{Timeout: 10 * time.Second, MinInterval: time.Millisecond, IO: ios})
	require.NoError(t, err)
	assert.Equal(t, "kc", l.Kubeconfig)
	assert.EqualValues(t, 3, calls.Load())
	assert.Contains(t, errOut.String(), "queued #2 in pool ci")
	assert.Contains(t, errOut.String(), "API unreachable, retrying")

	// A 4xx ends the wait.
	srv404 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"Lease not found","reason":"not_found"}`)
	}))
	defer srv404.Close()
	c404, _ := api.NewClient(srv404.URL)
	_, err = WaitForLease(context.Background(), c404, api.Lease{ID: "l1", Phase: "Pending"}, WaitOptions{Timeout: time.Second})
	assert.Equal(t, api.ReasonNotFound, api.Reason(err))
}

func TestParseMetadata(t *testing.T) {
	m, err := ParseMetadata([]string{"a=1", "b=x=y", "c="})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "x=y", "c": ""}, m)
	_, err = ParseMetadata([]string{"=v"})
	assert.Error(t, err)
	m, err = ParseMetadata(nil)
	require.NoError(t, err)
	assert.Nil(t, m)
}
