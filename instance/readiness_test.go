package instance_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
)

// secretToken is in the admin kubeconfig the fake backend hands out: it must never appear in an
// activity's error.
const secretToken = "s3cr3t-admin-token"

// adminOnly is a backend that only issues admin kubeconfigs, for a cluster that is not there
// (127.0.0.1:1): the activities' failures before any request reaches it are what is tested.
type adminOnly struct{ backends.RuntimeBackend }

func (adminOnly) Credentials(_ context.Context, id string, req backends.CredentialRequest) (backends.Credential, error) {
	if id != "i1" {
		return backends.Credential{}, backends.ErrNotFound
	}
	return backends.Credential{Kubeconfig: []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: ` + secretToken + `}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)}, nil
}

func activityEnv(t *testing.T) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	acts := worker.NewActivities(nil, zap.NewNop())
	acts.Backends["fake"] = adminOnly{}
	acts.RegisterActivities(env)
	return env
}

// nonRetryable asserts err is a non-retryable application error of the given type.
func nonRetryable(t *testing.T, err error, typ string) {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, typ, appErr.Type())
	assert.True(t, appErr.NonRetryable(), "retrying cannot help: %v", err)
	assert.NotContains(t, err.Error(), secretToken)
}

func TestApplyAddonsRefusesAManifestThatDoesNotParse(t *testing.T) {
	env := activityEnv(t)
	_, err := env.ExecuteActivity("ApplyAddons", instance.AddonsRequest{Backend: "fake", InstanceID: "i1",
		Addons: []poolspec.Addon{{Name: "broken", Manifest: "apiVersion: v1\nkind: [ConfigMap\n"}}})
	nonRetryable(t, err, instance.ErrInvalidAddon)
	assert.Contains(t, err.Error(), `addon "broken": document 1`)
}

func TestApplyAddonsOnAnUnknownInstance(t *testing.T) {
	env := activityEnv(t)
	_, err := env.ExecuteActivity("ApplyAddons", instance.AddonsRequest{Backend: "fake", InstanceID: "gone",
		Addons: []poolspec.Addon{{Name: "a", Manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"}}})
	nonRetryable(t, err, "InstanceNotFound")
}

func TestWaitReadinessGatesUnsupportedGate(t *testing.T) {
	env := activityEnv(t)
	_, err := env.ExecuteActivity("WaitReadinessGates", instance.GatesRequest{Backend: "fake", InstanceID: "i1",
		Gates: []poolspec.ReadinessGate{{Type: "Telepathy"}}, Deadline: time.Now().Add(time.Minute)})
	nonRetryable(t, err, instance.ErrUnsupportedGate)
}

func TestWaitReadinessGatesDeadlineIsFinal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	env := activityEnv(t)
	_, err := env.ExecuteActivity("WaitReadinessGates", instance.GatesRequest{Backend: "fake", InstanceID: "i1",
		Gates:    []poolspec.ReadinessGate{{Type: "URLHealthy", URL: srv.URL + "/healthz"}},
		Deadline: time.Now().Add(100 * time.Millisecond)})
	nonRetryable(t, err, instance.ErrGatesNotPassed)
	assert.Contains(t, err.Error(), "instance i1: 1 of 1 readiness gates not passed: URLHealthy "+srv.URL+"/healthz")
	assert.Contains(t, err.Error(), "503 Service Unavailable")
}
