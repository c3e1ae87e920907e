package capi

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kunobi-ninja/kobe/backends"
)

func TestParseOptionsRefusesWhatItCannotUse(t *testing.T) {
	for raw, want := range map[string]string{
		``:   "spec.backend.capi: required",
		`{}`: "give infrastructureApiVersion + infrastructureKind",
		`{"infrastructureKind":"DevCluster","topology":{"class":"c"}}`:                                          "not both",
		`{"infrastructureKind":"DevCluster"}`:                                                                   "infrastructureApiVersion: required",
		`{"infrastructureApiVersion":"v1beta2","infrastructureKind":"DevCluster"}`:                              "must be <group>/<version>",
		`{"infrastructureApiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","infrastructureKind":"dev"}`:     "is not a kind",
		`{"infrastructureApiVersion":"a.b/v1","infrastructureKind":"Foo"}`:                                      "machineTemplateKind: required",
		`{"infrastructureApiVersion":"a.b/v1","infrastructureKind":"FooCluster","infrastructureSpec":[1]}`:      "infrastructureSpec: must be an object",
		`{"infrastructureApiVersion":"a.b/v1","infrastructureKind":"FooCluster","bogus":1}`:                     `unknown field "bogus"`,
		`{"infrastructureApiVersion":"a.b/v1","infrastructureKind":"FooCluster","controlPlane":{"replicas":9}}`: "controlPlane.replicas: 9 must be between 1 and 7",
		`{"topology":{"class":"Bad_Name"}}`:                                                                     "topology.class",
		`{"topology":{"class":"c","variables":[{"name":"a","value":1},{"name":"a","value":2}]}}`:                "variables[1].name: \"a\" is given twice",
		`{"topology":{"class":"c","variables":[{"name":"a"}]}}`:                                                 "variables[0].value: required",
		`{"topology":{"class":"c","workers":[{"class":"w","name":"md-0","replicas":-1}]}}`:                      "workers[0].replicas: -1",
		`{"topology":{"class":"c","version":"v1.37.0"}}`:                                                        `unknown field "version"`,
		`{"topology":{"class":"c"},"namespace":"Not_A_NS"}`:                                                     "namespace",
	} {
		_, err := ParseOptions(json.RawMessage(raw))
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), want, raw)
	}
}

func TestPassThroughDefaultsAndRender(t *testing.T) {
	o, err := ParseOptions(json.RawMessage(`{"infrastructureApiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","infrastructureKind":"DevCluster",
		"infrastructureSpec":{"backend":{"inMemory":{}}}}`))
	require.NoError(t, err)
	assert.Equal(t, "default", o.Namespace)
	assert.Equal(t, "DevMachineTemplate", o.ControlPlane.MachineTemplateKind, "derived from the infrastructure kind")

	c, err := renderCluster("i-1", "p", "v1.37.0", o)
	require.NoError(t, err)
	ref, _, _ := unstructured.NestedStringMap(c.Object, "spec", "infrastructureRef")
	assert.Equal(t, map[string]string{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": "i-1"}, ref)
	cp, _, _ := unstructured.NestedStringMap(c.Object, "spec", "controlPlaneRef")
	assert.Equal(t, "i-1-control-plane", cp["name"])
	assert.Equal(t, map[string]string{LabelInstance: "i-1", LabelPool: "p"}, c.GetLabels())

	infra, err := renderInfrastructure("i-1", "p", o)
	require.NoError(t, err)
	_, found, _ := unstructured.NestedMap(infra.Object, "spec", "backend", "inMemory")
	assert.True(t, found, "infrastructureSpec is passed through as is")

	kcp := renderControlPlane("i-1", "p", "v1.37.0", o)
	v, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	assert.Equal(t, "v1.37.0", v)
	n, _, _ := unstructured.NestedInt64(kcp.Object, "spec", "replicas")
	assert.EqualValues(t, 1, n)
	mt, _, _ := unstructured.NestedStringMap(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef")
	assert.Equal(t, "DevMachineTemplate", mt["kind"])
}

func TestTopologyRender(t *testing.T) {
	o, err := ParseOptions(json.RawMessage(`{"topology":{"class":"in-memory","classNamespace":"classes",
		"variables":[{"name":"flavour","value":{"size":"s"}}],"controlPlane":{"replicas":3},
		"workers":[{"class":"default-worker","name":"md-0","replicas":2}]},"namespace":"ci"}`))
	require.NoError(t, err)
	c, err := renderCluster("i-2", "p", "v1.37.0", o)
	require.NoError(t, err)
	assert.Equal(t, "ci", c.GetNamespace())
	topo, _, _ := unstructured.NestedMap(c.Object, "spec", "topology")
	assert.Equal(t, "v1.37.0", topo["version"], "the pool's spec.cluster.version")
	assert.Equal(t, map[string]any{"name": "in-memory", "namespace": "classes"}, topo["classRef"])
	assert.Equal(t, map[string]any{"replicas": int64(3)}, topo["controlPlane"])
	assert.Equal(t, []any{map[string]any{"name": "flavour", "value": map[string]any{"size": "s"}}}, topo["variables"])
	_, hasRef, _ := unstructured.NestedMap(c.Object, "spec", "infrastructureRef")
	assert.False(t, hasRef, "a topology's objects are made by CAPI from the class")
}

func TestValidateNeedsAManagementCluster(t *testing.T) {
	b := &Backend{unavailable: "this worker has no management cluster"}
	err := b.Validate(backends.InstanceSpec{ID: "x", KubernetesVersion: "v1.37.0", Options: json.RawMessage(`{"topology":{"class":"c"}}`)})
	require.ErrorContains(t, err, "no management cluster")
}

func cluster(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(doc), &m))
	return &unstructured.Unstructured{Object: m}
}

func TestConditionsMapToReasonCodes(t *testing.T) {
	c := cluster(t, `{"metadata":{"name":"i"},"spec":{"topology":{"classRef":{"name":"c"}},"controlPlaneEndpoint":{"host":"127.0.0.1","port":20001}},
	  "status":{"conditions":[{"type":"TopologyReconciled","status":"True"},{"type":"InfrastructureReady","status":"True"},
	  {"type":"ControlPlaneInitialized","status":"False","reason":"NotInitialized","message":"Control plane not yet\n initialized"},
	  {"type":"Available","status":"False","reason":"NotAvailable"}]}}`)
	st := statusOf("i", c, false)
	assert.Equal(t, backends.PhaseCreating, st.Phase)
	assert.Equal(t, "https://127.0.0.1:20001", st.Endpoint)
	assert.Equal(t, "[2/8] capi_control_plane_initializing: ControlPlaneInitialized=False (NotInitialized): Control plane not yet initialized", st.Message)

	ready := cluster(t, `{"metadata":{"name":"i"},"spec":{},"status":{"conditions":[
	  {"type":"InfrastructureReady","status":"True"},{"type":"ControlPlaneInitialized","status":"True"},{"type":"ControlPlaneAvailable","status":"True"},
	  {"type":"WorkersAvailable","status":"True"},{"type":"RemoteConnectionProbe","status":"True"},{"type":"Available","status":"True"}]}}`)
	st = statusOf("i", ready, false)
	assert.Equal(t, backends.PhaseCreating, st.Phase, "Available without the kubeconfig Secret is not Ready")
	assert.Contains(t, st.Message, "[6/7] capi_kubeconfig_missing")
	assert.Equal(t, backends.PhaseReady, statusOf("i", ready, true).Phase)

	// Once seen Ready, a Cluster that is no longer Available is Unhealthy.
	broken := cluster(t, `{"metadata":{"name":"i","annotations":{"kobe.kunobi.ninja/ready-at":"2026-12-01T00:00:00Z"}},"spec":{},"status":{"conditions":[
	  {"type":"InfrastructureReady","status":"True"},{"type":"ControlPlaneInitialized","status":"True"},{"type":"ControlPlaneAvailable","status":"True"},
	  {"type":"WorkersAvailable","status":"True"},{"type":"RemoteConnectionProbe","status":"False","reason":"ProbeFailed"},{"type":"Available","status":"False"}]}}`)
	st = statusOf("i", broken, true)
	assert.Equal(t, backends.PhaseUnhealthy, st.Phase)
	assert.Contains(t, st.Message, "capi_remote_connection_failing: RemoteConnectionProbe=False (ProbeFailed)")

	failed := cluster(t, `{"metadata":{"name":"i"},"spec":{},"status":{"deprecated":{"v1beta1":{"failureReason":"InvalidConfiguration","failureMessage":"bad"}}}}`)
	st = statusOf("i", failed, false)
	assert.Equal(t, backends.PhaseFailed, st.Phase)
	assert.Equal(t, "capi_failed: InvalidConfiguration: bad", st.Message)
}

// A spec the backend refuses is marked so: the activity does not retry it.
func TestRefusalsAreInvalidSpecs(t *testing.T) {
	b := &Backend{}
	err := b.Validate(backends.InstanceSpec{ID: "x", KubernetesVersion: "v1.37.0", Options: json.RawMessage(`{"topology":{}}`)})
	require.Error(t, err)
	assert.True(t, backends.IsInvalidSpec(err), "%v", err)
	err = b.Validate(backends.InstanceSpec{ID: "Bad", KubernetesVersion: "v1.37.0"})
	assert.True(t, backends.IsInvalidSpec(err), "%v", err)
	assert.False(t, backends.IsInvalidSpec((&Backend{unavailable: "no management cluster"}).Validate(backends.InstanceSpec{ID: "x"})),
		"a worker without a management cluster is not a bad spec")
}
