package server_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/server"
)

// termsManifest sets every lease term away from its default.
const termsManifest = `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: terms}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  ttl: 45m
  maxTtl: 3h
  maxExtensions: 5
  scaling: {minReady: 0, maxClusters: 1, resumeTimeout: 4m}
  certificates: {recycleBefore: 12d}
  readinessGates: [{type: X509Valid, minRemaining: 40d}]
  sleep:
    afterInactivity: 15m
    exclude: [{alias: "keep-*"}]
`

// The terms a lease's workflow is started with are those poolspec derives from its pool's
// manifest for that request (Policy.LeaseTerms), nothing the handler works out itself: a lease
// created through the API, on a real Temporal with a real worker, carries in its start input
// exactly the terms of its pool's stored manifest (ttl asked, ceiling, extensions, inactivity
// with the pool's exclusions, the wake's resume timeout and certificate minimum), and its
// store row the same TTL.
func TestALeaseCarriesTheTermsOfItsPoolsManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp, st, s := serverWithHeldPool(t, "terms", func(s *server.Server) { s.SlowBindOnly = true })
	m, err := poolspec.Parse([]byte(termsManifest))
	require.NoError(t, err)
	spec, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, st.UpsertPool(ctx, store.Pool{Name: "terms", Backend: "local", Spec: spec}))
	pol, err := poolspec.ParseStored(spec)
	require.NoError(t, err)

	for _, tc := range []struct{ body, alias string }{
		{`{"pool":"terms","ttl":"90m","alias":"mine"}`, "mine"},
		{`{"profile":"terms","alias":"keep-me"}`, "keep-me"}, // excluded from auto-sleep, the pool's ttl
	} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/leases", strings.NewReader(tc.body)))
		require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
		var created api.Lease
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &created))

		var req api.LeaseRequest
		require.NoError(t, json.Unmarshal([]byte(tc.body), &req))
		ask := poolspec.LeaseAsk{Owner: "anonymous", Alias: tc.alias}
		if req.TTL != "" {
			ask.TTL, err = time.ParseDuration(req.TTL)
			require.NoError(t, err)
		}
		want := pol.LeaseTerms(ask)
		got := startInput(t, tmp.Client, created.ID)
		assert.Equal(t, want, got.LeaseTerms, "%s: the lease's terms are its pool's", tc.body)
		assert.NotZero(t, got.CertificatesMinRemaining)
		assert.Equal(t, 40*24*time.Hour, got.CertificatesMinRemaining, "the X509Valid gate's minimum")
		assert.Equal(t, 4*time.Minute, got.ResumeTimeout)
		row, err := st.GetLease(ctx, created.ID)
		require.NoError(t, err)
		assert.Equal(t, want.TTL, row.TTL)
		assert.Equal(t, want.TTL.String(), created.EffectiveTTL)
	}
}

// startInput is the input lease id's workflow was started with, from its history.
func startInput(t *testing.T, c client.Client, id string) lease.Input {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	require.True(t, it.HasNext(), "lease %s has a history", id)
	e, err := it.Next()
	require.NoError(t, err)
	started := e.GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(t, started, "the first event starts the workflow")
	var in lease.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in))
	return in
}

// Where the lease's terms may be worked out, and a pool's manifest read, by the server and by
// the lease: poolspec derives both (Policy.LeaseTerms, ParseStored); the server calls the
// first only when it admits a lease (admit) and the second only in its one reader of a pool's
// policy (policyOf); the lease — its wakes, its schedules' wakes — calls neither, it reads its
// own terms. A call anywhere else is a second derivation of what the lease already carries.
func TestOnlyTheDomainDerivesALeasesTerms(t *testing.T) {
	allowed := map[string][]string{
		"LeaseTerms":             {"server.admit"},
		"ParseStored":            {"server.policyOf"},
		"ValidateStored":         {},
		"InactivityFor":          {},
		"WakeCertificateMinimum": {},
	}
	for _, dir := range []string{".", "../lease"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			require.NoError(t, err)
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				where := f.Name.Name + "." + fn.Name.Name
				ast.Inspect(fn, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if places, watched := allowed[sel.Sel.Name]; watched {
						assert.Contains(t, places, where, "%s calls %s (%s): the lease's terms are derived once, by poolspec at admission",
							where, sel.Sel.Name, fset.Position(call.Pos()))
					}
					return true
				})
			}
		}
	}
}
