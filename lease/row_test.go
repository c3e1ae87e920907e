package lease_test

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
)

// Where each field of a lease's store row comes from in lease.Row, the domain → row
// translation: the workflow's view (a field of the same name), or the row as it was (what only
// the row knows). A field added to store.Lease or to lease.View without a line here fails
// TestRowTranslatesEveryField.
var (
	rowFromView = []string{"ID", "Pool", "Principal", "Phase", "InstanceID", "TTL", "ExpiresAt", "Reason"}
	rowOnly     = []string{"Alias", "IdempotencyKey", "Metadata", "Role", "RequestHash", "CreatedAt", "UpdatedAt"}
	// viewNotStored are the view's fields the row does not keep: the API reads them from the
	// workflow while it runs (QueryLease), and the row is what is left once it ended.
	viewNotStored = []string{"Endpoint", "BoundAt", "Extensions", "ClaimedAt", "AssignmentSeq", "Conditions", "IdleTimeout",
		"AfterInactivity", "Sleeping", "Sleeps"}
)

func TestRowTranslatesEveryField(t *testing.T) {
	assert.ElementsMatch(t, fieldNames(store.Lease{}), append(append([]string{}, rowFromView...), rowOnly...),
		"every field of store.Lease comes from the view or is the row's own: say which in rowFromView or rowOnly")
	assert.ElementsMatch(t, fieldNames(lease.View{}), append(append([]string{}, rowFromView...), viewNotStored...),
		"every field of lease.View is stored (rowFromView) or not (viewNotStored)")

	v := filledView()
	for _, f := range fieldNames(v) {
		assert.False(t, reflect.ValueOf(v).FieldByName(f).IsZero(), "filledView fills %s", f)
	}
	stored := store.Lease{Alias: "ci-1", IdempotencyKey: "key", Metadata: map[string]string{"job": "7"}, Role: "ci",
		RequestHash: "hash", CreatedAt: time.Unix(100, 0).UTC(), UpdatedAt: time.Unix(200, 0).UTC()}
	row := lease.Row(v, stored)
	rv, vv, sv := reflect.ValueOf(row), reflect.ValueOf(v), reflect.ValueOf(stored)
	for _, f := range rowFromView {
		assert.Equal(t, vv.FieldByName(f).Interface(), rv.FieldByName(f).Interface(), "%s comes from the view", f)
	}
	for _, f := range rowOnly {
		assert.Equal(t, sv.FieldByName(f).Interface(), rv.FieldByName(f).Interface(), "%s is kept from the row", f)
		assert.False(t, sv.FieldByName(f).IsZero(), "the test fills %s", f)
	}

	// The principal first written stands (a view never holds another, but a row is not rewritten).
	stored.Principal = "first"
	assert.Equal(t, "first", lease.Row(v, stored).Principal)
}

// The row the store keeps after RecordLease is the translation's, on a real store: a lease's
// admission row (what the API writes), then its workflow's views.
func TestRecordLeaseWritesTheTranslatedRow(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v := filledView()
	admitted, _, err := st.AdmitLease(ctx, store.AdmitRequest{Lease: lease.Row(lease.View{ID: v.ID, Pool: v.Pool,
		Principal: v.Principal, Phase: api.LeasePending, TTL: v.TTL}, store.Lease{Alias: "ci-1", Role: "ci",
		Metadata: map[string]string{"job": "7"}, IdempotencyKey: "key", RequestHash: "hash"})})
	require.NoError(t, err)

	a := &lease.Activities{Store: st}
	require.NoError(t, a.RecordLease(ctx, v))
	got, err := st.GetLease(ctx, v.ID)
	require.NoError(t, err)
	want := lease.Row(v, admitted)
	assert.True(t, want.ExpiresAt.Equal(got.ExpiresAt), "expiry %s, stored %s", want.ExpiresAt, got.ExpiresAt)
	want.ExpiresAt, want.UpdatedAt = got.ExpiresAt, got.UpdatedAt
	assert.True(t, want.CreatedAt.Equal(got.CreatedAt))
	want.CreatedAt = got.CreatedAt
	assert.Equal(t, want, got)

	// Recording the same view again writes nothing new (no second lease.bound event).
	require.NoError(t, a.RecordLease(ctx, v))
	evs, err := st.ListEvents(ctx, store.EventFilter{Target: v.ID})
	require.NoError(t, err)
	assert.Len(t, evs, 1, "one transition, one event: %+v", evs)
}

// filledView is a lease's view with every field set, Bound.
func filledView() lease.View {
	at := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	return lease.View{ID: "lease-full", Pool: "ci", Principal: "ann", TTL: time.Hour, Phase: api.LeaseBound,
		Reason: api.ReasonIdleTimeout, InstanceID: "ci-1", Endpoint: "https://ci-1", BoundAt: at, ExpiresAt: at.Add(time.Hour),
		Extensions: 1, ClaimedAt: at.Add(-time.Second), AssignmentSeq: 3,
		Conditions:  []api.LeaseCondition{{Type: lease.ConditionSleeping, Status: "True", LastTransitionTime: at}},
		IdleTimeout: time.Minute, AfterInactivity: 5 * time.Minute, Sleeping: true, Sleeps: 1}
}

// fieldNames are the names of a struct's fields, sorted.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	var out []string
	for i := 0; i < t.NumField(); i++ {
		out = append(out, t.Field(i).Name)
	}
	sort.Strings(out)
	return out
}
