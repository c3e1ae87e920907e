package leasestart

import (
	"encoding/json"
	"github.com/kunobi-ninja/kobe/poolspec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/instance"
)

// oldPoolInput is the payload a pool of v0.1.0 started a warm-bound lease with: the API's
// encoding of the Input, decoded into a map by the pool, with the assignment added as "bound"
// and encoded again.
func oldPoolInput(t *testing.T, in Input, asg Assignment) []byte {
	t.Helper()
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	m["bound"], err = json.Marshal(asg)
	require.NoError(t, err)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

// The pool now sets Input.Bound instead of patching the API's JSON: a lease started by an
// older pool (the map payload) decodes into the same Input, and the typed Input encodes to the
// very bytes the older pool sent, so either kind of run reads the other's start.
func TestAnInputStartedByAnOlderPoolDecodesTheSame(t *testing.T) {
	at := time.Date(2026, 12, 6, 21, 26, 52, 977117296, time.UTC)
	asg := Assignment{Seq: 2, InstanceID: "rec-1", Backend: "local", Endpoint: "https://127.0.0.1:63530",
		Placement: instance.HostAssignment{HostID: "vm-1", TaskQueue: "record-host-host-vm-1"}, At: at, Prepared: true}
	in := Input{LeaseID: "lease-1", Pool: "rec", Principal: "p",
		LeaseTerms:  poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour, MaxExtensions: 1},
		IdleTimeout: 5 * time.Minute, SearchAttributes: true}
	old := oldPoolInput(t, in, asg)

	var got Input
	require.NoError(t, json.Unmarshal(old, &got))
	want := in
	want.Bound = &asg
	assert.Equal(t, want, got)

	typed, err := json.Marshal(want)
	require.NoError(t, err)
	assert.JSONEq(t, string(old), string(typed))
	assert.Equal(t, string(old), string(typed), "byte for byte")
	assert.Contains(t, string(typed), `"ttl":"1h0m0s"`, "durations stay strings")
}

// A start recorded in a v0.1.0 history (lease-warm-v0.1.0.json) decodes: the same payload,
// written out.
func TestARecordedWarmStartDecodes(t *testing.T) {
	recorded := `{"bound":{"seq":2,"instanceId":"rec-29f79456-2","backend":"local","placement":{"hostId":"vm-e19b10","taskQueue":"record-host-host-vm-e19b10"},"endpoint":"https://127.0.0.1:63530","at":"2026-12-06T21:26:52.977117296Z","prepared":true},"leaseId":"lease-rec-warm","maxExtensions":1,"maxTtl":"2h0m0s","pool":"rec","principal":"p","priority":0,"searchAttributes":true,"ttl":"1h0m0s"}`
	var in Input
	require.NoError(t, json.Unmarshal([]byte(recorded), &in))
	require.NotNil(t, in.Bound)
	assert.Equal(t, "rec-29f79456-2", in.Bound.InstanceID)
	assert.True(t, in.Bound.Prepared)
	assert.Equal(t, time.Hour, in.TTL)
	assert.Equal(t, 2*time.Hour, in.MaxTTL)
	again, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Equal(t, recorded, string(again), "the typed Input writes what was recorded")
}
