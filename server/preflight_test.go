package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// judgedBackend is a backend whose specs are judged against an environment: its Preflight
// refuses the pool named "refused" and cannot reach its environment for the pool named
// "down". It creates nothing; only its verdicts matter here. The real preflight (capi against
// real Cluster API controllers) is tested in testsuite/capi_pool_test.go.
type judgedBackend struct{ preflights chan string }

func (judgedBackend) Name() string { return "judged" }
func (judgedBackend) Validate(spec backends.InstanceSpec) error {
	if spec.KubernetesVersion == "v0.0.0" {
		return errors.New("spec.cluster.version: v0.0.0 is not served by this backend")
	}
	return nil
}
func (b judgedBackend) Preflight(_ context.Context, spec backends.InstanceSpec) error {
	b.preflights <- spec.Pool
	switch spec.Pool {
	case "refused":
		return backends.InvalidSpec(errors.New("spec.backend: the environment has no such class"))
	case "down":
		return errors.New("the environment does not answer")
	}
	return nil
}
func (judgedBackend) Create(context.Context, backends.InstanceSpec) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{}, errors.New("not in this test")
}
func (judgedBackend) Status(context.Context, string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{}, backends.ErrNotFound
}
func (judgedBackend) WaitReady(context.Context, string, func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{}, errors.New("not in this test")
}
func (judgedBackend) Credentials(context.Context, string, backends.CredentialRequest) (backends.Credential, error) {
	return backends.Credential{}, errors.New("not in this test")
}
func (judgedBackend) RevokeCredentials(context.Context, string, string) error { return nil }
func (judgedBackend) Delete(context.Context, string) error                    { return nil }

func init() {
	backends.Register(backends.Factory{Name: "judged", Description: "test backend with a preflight",
		New: func(backends.Environment) (backends.RuntimeBackend, error) {
			return judgedBackend{preflights: make(chan string, 10)}, nil
		},
		Prototype: judgedBackend{}})
}

// PUT /v1/pools/{name} judges the spec on a worker before it records anything: a spec the
// backend's environment refuses is a 400 that names why, an environment that cannot answer is a
// 503, and in both cases neither the pool's row nor its workflow exists afterwards. A spec
// refused by the backend's Validate is refused the same way.
func TestPoolApplyIsRefusedByTheBackendsPreflight(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	b := judgedBackend{preflights: make(chan string, 10)}
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["judged"] = b
	w := worker.New(tmp.Client, "preflight", acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	s := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "preflight", InsecureNoAuth: true}
	h := s.Handler()
	put := func(name, version string) (int, api.ErrorBody) {
		rec := httptest.NewRecorder()
		body := `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"` + name + `"},
			"spec":{"size":0,"ttl":"10m","backend":{"type":"judged"},"cluster":{"version":"` + version + `"}}}`
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/pools/"+name, strings.NewReader(body)))
		var eb api.ErrorBody
		if rec.Code >= 400 {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), rec.Body.String())
		}
		return rec.Code, eb
	}
	preflighted := func() string {
		select {
		case pool := <-b.preflights:
			return pool
		default:
			return "" // the apply answered before any preflight ran
		}
	}
	nothingOf := func(name string) {
		t.Helper()
		_, err := st.GetPool(ctx, name)
		assert.ErrorIs(t, err, store.ErrNotFound, "no row for pool %s", name)
		_, err = tmp.Client.DescribeWorkflowExecution(ctx, pool.WorkflowID(name), "")
		assert.Error(t, err, "no workflow for pool %s", name)
	}

	code, eb := put("refused", "v1.37.2")
	assert.Equal(t, 400, code)
	assert.Equal(t, api.ReasonInvalidRequest, eb.Reason)
	assert.Contains(t, eb.Detail, "the environment has no such class")
	assert.Equal(t, "refused", preflighted(), "judged by the backend on a worker")
	nothingOf("refused")

	code, eb = put("down", "v1.37.2")
	assert.Equal(t, 503, code)
	assert.Equal(t, api.ReasonBackendError, eb.Reason)
	assert.Contains(t, eb.Detail, "the environment does not answer")
	assert.Equal(t, "down", preflighted())
	nothingOf("down")

	code, eb = put("old", "v0.0.0")
	assert.Equal(t, 400, code)
	assert.Contains(t, eb.Detail, "v0.0.0 is not served by this backend")
	nothingOf("old")
	assert.Empty(t, preflighted(), "a spec Validate refuses is not preflighted")

	code, _ = put("fine", "v1.37.2")
	assert.Equal(t, 201, code)
	assert.Equal(t, "fine", preflighted())
	_, err := st.GetPool(ctx, "fine")
	assert.NoError(t, err, "a spec the backend accepts is applied")
}
