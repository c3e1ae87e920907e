package server

import (
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// A lease has three shapes: its wire view (api), its store row (store.Lease) and its workflow's
// state (lease.Input at its start, lease.View as it goes). The tests below hold each
// translation between them to every field: a field added to one shape without a line in these
// tables (where it goes, or why it does not) fails them.

// Where each field of POST /v1/leases's body goes (leaseRequest, then admissionRow).
var leaseRequestTo = map[string]string{
	"Pool":           "Input.Pool",
	"Profile":        "Input.Pool (upstream's name)",
	"TTL":            "LeaseAsk.TTL → the lease's terms",
	"Alias":          "LeaseAsk.Alias (sleep exclusions) and the row",
	"Metadata":       "LeaseAsk.Metadata (sleep exclusions) and the row",
	"IdempotencyKey": "the row",
	"Priority":       "Input.Priority",
	"IdleTimeout":    "Input.IdleTimeout",
}

// Who sets each field of a lease's start input.
var inputSetBy = map[string]string{
	"LeaseID":            "the admission (newID, or the replayed lease's)",
	"Pool":               "leaseRequest",
	"Principal":          "the admission",
	"LeaseTerms":         "the admission: its pool's terms (poolspec.Policy.LeaseTerms)",
	"Priority":           "leaseRequest",
	"IdleTimeout":        "leaseRequest",
	"SearchAttributes":   "the start (lease.Start, warmBind)",
	"ContinueAsNewAfter": "the server's setting",
	"Resume":             "the lease's continue-as-new",
	"Bound":              "the pool's warm bind",
}

func TestLeaseRequestTranslatesEveryField(t *testing.T) {
	assert.ElementsMatch(t, keys(leaseRequestTo), fieldNames(api.LeaseRequest{}), "say where each field of api.LeaseRequest goes")
	assert.ElementsMatch(t, keys(inputSetBy), fieldNames(lease.Input{}), "say who sets each field of lease.Input")

	req := api.LeaseRequest{Pool: "ci", Profile: "ci", TTL: "90m", Alias: "ci-1", Metadata: map[string]string{"job": "7"},
		IdempotencyKey: "key-1", Priority: 7, IdleTimeout: "2m"}
	requireAllSet(t, req)
	in, ask, err := leaseRequest(req)
	require.NoError(t, err)
	assert.Equal(t, lease.Input{Pool: "ci", Priority: 7, IdleTimeout: 2 * time.Minute}, in)
	assert.Equal(t, poolspec.LeaseAsk{TTL: 90 * time.Minute, Alias: "ci-1", Metadata: map[string]string{"job": "7"}}, ask)
	in, _, err = leaseRequest(api.LeaseRequest{Profile: "ci"})
	require.NoError(t, err)
	assert.Equal(t, "ci", in.Pool, "profile alone names the pool")

	// The admission completes the input and writes the row.
	pol := poolspec.Policy{Name: "ci", TTL: time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3}
	in, ask, err = leaseRequest(req)
	require.NoError(t, err)
	in.LeaseTerms, err = admit(pol, access.Principal{Name: "ann", Role: "ci"}, access.Role{}, ask)
	require.NoError(t, err)
	in.LeaseID, in.Principal = "lease-1", "ann"
	assert.Equal(t, pol.LeaseTerms(poolspec.LeaseAsk{TTL: 90 * time.Minute, Owner: "ann", Alias: "ci-1",
		Metadata: map[string]string{"job": "7"}}), in.LeaseTerms, "the terms are the pool's, derived once")
	row := admissionRow(in, ask, "ci", req)
	assert.Equal(t, store.Lease{ID: "lease-1", Pool: "ci", Principal: "ann", Phase: api.LeasePending, TTL: 90 * time.Minute,
		Alias: "ci-1", Metadata: map[string]string{"job": "7"}, IdempotencyKey: "key-1", Role: "ci",
		RequestHash: requestHash(in, ask)}, row)
}

// The request's hash is that of v0.1.0 (a retry with its idempotency key across an upgrade must
// replay, not conflict): the same fields, the same bytes. The value was computed by v0.1.0's
// leaseCreate.requestHash for this request.
func TestRequestHashIsStable(t *testing.T) {
	in, ask, err := leaseRequest(api.LeaseRequest{Pool: "ci", TTL: "90m", Alias: "ci-1", Metadata: map[string]string{"job": "7"},
		Priority: 7, IdleTimeout: "2m"})
	require.NoError(t, err)
	assert.Equal(t, "277eb5c1bc9ff00ce7d43307754c8de7c047692606bf995986126e7f1c6dc5b9", requestHash(in, ask))
}

// Where each field of the wire's lease comes from: the row (storeView), the workflow's view
// (applyWorkflowView, over the row's), or the handler.
var wireLeaseFrom = map[string]string{
	"ID":            "row",
	"ResourceKind":  "constant Cluster",
	"Phase":         "view (row when no view)",
	"Profile":       "row (its pool, upstream's name)",
	"Pool":          "row",
	"EffectiveTTL":  "row TTL",
	"QueuePosition": "the handler (the pool's queue)",
	"Alias":         "row",
	"Metadata":      "row",
	"Owner":         "row Principal",
	"Reason":        "view (row when no view)",
	"ClusterName":   "view InstanceID (row when no view)",
	"Endpoint":      "view",
	"CreatedAt":     "row",
	"BoundAt":       "view",
	"ExpiresAt":     "view (row when no view)",
	"Extensions":    "view",
	"Sleeping":      "view",
	"Capabilities":  "the phase and sleep (leaseCapabilities)",
	"Conditions":    "view",
	"Kubeconfig":    "the handler (lease_credentials)",
}

var (
	// rowNotOnWire are the row's fields the wire does not show.
	rowNotOnWire = []string{"IdempotencyKey", "RequestHash", "Role", "UpdatedAt"}
	// viewNotOnWire are the view's fields the wire does not show (ID, pool, principal and TTL
	// it shows from the row, which has the same).
	viewNotOnWire = []string{"ID", "Pool", "Principal", "TTL", "ClaimedAt", "AssignmentSeq", "IdleTimeout", "AfterInactivity", "Sleeps"}
)

func TestWireLeaseTranslatesEveryField(t *testing.T) {
	assert.ElementsMatch(t, keys(wireLeaseFrom), fieldNames(api.Lease{}), "say where each field of api.Lease comes from")
	at := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	row := store.Lease{ID: "lease-1", Pool: "ci", Principal: "ann", Phase: api.LeasePending, InstanceID: "row-inst", Alias: "ci-1",
		IdempotencyKey: "k", TTL: time.Hour, ExpiresAt: at, Metadata: map[string]string{"job": "7"}, Reason: api.ReasonOrphaned,
		Role: "ci", RequestHash: "h", CreatedAt: at.Add(-time.Hour), UpdatedAt: at}
	requireAllSet(t, row)
	shownRow := []string{"ID", "Pool", "Principal", "Phase", "InstanceID", "Alias", "TTL", "ExpiresAt", "Metadata", "Reason", "CreatedAt"}
	assert.ElementsMatch(t, fieldNames(store.Lease{}), append(shownRow, rowNotOnWire...), "say whether each row field is shown")

	v := (&Server{}).storeView(row)
	assert.Equal(t, api.Lease{ID: "lease-1", ResourceKind: "Cluster", Phase: api.LeasePending, Profile: "ci", Pool: "ci",
		EffectiveTTL: "1h0m0s", Alias: "ci-1", Metadata: map[string]string{"job": "7"}, Owner: "ann", Reason: api.ReasonOrphaned,
		ClusterName: "row-inst", CreatedAt: at.Add(-time.Hour), ExpiresAt: &at, Capabilities: []string{CapRelease},
		Conditions: []api.LeaseCondition{}}, v)

	lv := lease.View{ID: "lease-1", Pool: "ci", Principal: "ann", TTL: time.Hour, Phase: api.LeaseBound, Reason: api.ReasonIdleTimeout,
		InstanceID: "view-inst", Endpoint: "https://view-inst", BoundAt: at.Add(time.Minute), ExpiresAt: at.Add(2 * time.Hour),
		Extensions: 1, ClaimedAt: at, AssignmentSeq: 3, IdleTimeout: time.Minute, AfterInactivity: time.Hour, Sleeping: true, Sleeps: 1,
		Conditions: []api.LeaseCondition{{Type: lease.ConditionSleeping, Status: "True", LastTransitionTime: at}}}
	requireAllSet(t, lv)
	shownView := []string{"Phase", "Reason", "InstanceID", "Endpoint", "BoundAt", "ExpiresAt", "Extensions", "Sleeping", "Conditions"}
	assert.ElementsMatch(t, fieldNames(lease.View{}), append(shownView, viewNotOnWire...), "say whether each view field is shown")
	applyWorkflowView(&v, lv)
	boundAt, expiresAt := lv.BoundAt, lv.ExpiresAt
	assert.Equal(t, api.Lease{ID: "lease-1", ResourceKind: "Cluster", Phase: api.LeaseBound, Profile: "ci", Pool: "ci",
		EffectiveTTL: "1h0m0s", Alias: "ci-1", Metadata: map[string]string{"job": "7"}, Owner: "ann", Reason: api.ReasonIdleTimeout,
		ClusterName: "view-inst", Endpoint: "https://view-inst", CreatedAt: at.Add(-time.Hour), BoundAt: &boundAt,
		ExpiresAt: &expiresAt, Extensions: 1, Sleeping: true, Capabilities: []string{CapRelease}, Conditions: lv.Conditions}, v)
}

// A lease in its pool's list shows who holds it only to its holder and to a pool admin.
func TestPoolLeaseTranslatesEveryField(t *testing.T) {
	at := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	row := store.Lease{ID: "lease-1", Pool: "ci", Principal: "ann", Phase: api.LeaseBound, InstanceID: "ci-1", Alias: "a",
		TTL: time.Hour, ExpiresAt: at, Metadata: map[string]string{"job": "7"}, CreatedAt: at.Add(-time.Hour)}
	shown := poolLeaseView(row, true)
	requireAllSet(t, shown)
	assert.Equal(t, api.PoolLease{ID: "lease-1", Phase: api.LeaseBound, Profile: "ci", ClusterName: "ci-1", Requester: "ann",
		ExpiresAt: &at, Alias: "a", Metadata: map[string]string{"job": "7"}, CreatedAt: at.Add(-time.Hour)}, shown)
	assert.Equal(t, api.PoolLease{ID: "lease-1", Phase: api.LeaseBound, Profile: "ci", ClusterName: "ci-1", ExpiresAt: &at,
		CreatedAt: at.Add(-time.Hour)}, poolLeaseView(row, false), "another's lease: no requester, alias or metadata")
}

// requireAllSet fails when a field of the struct v is zero: the tables above are checked on
// values that fill every field.
func requireAllSet(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := 0; i < rv.NumField(); i++ {
		require.False(t, rv.Field(i).IsZero(), "%T.%s is not filled by the test", v, rv.Type().Field(i).Name)
	}
}

func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	var out []string
	for i := 0; i < t.NumField(); i++ {
		out = append(out, t.Field(i).Name)
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
