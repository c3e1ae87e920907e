package vcluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
)

func TestOptionsAreParsedAndBadOnesNamed(t *testing.T) {
	o, err := ParseOptions(json.RawMessage(`{"chartVersion":"0.34.0","values":"sync:\n  toHost:\n    ingresses:\n      enabled: true\n"}`))
	require.NoError(t, err)
	v, ok := valueAt(o.values, "sync", "toHost", "ingresses", "enabled")
	require.True(t, ok)
	assert.Equal(t, true, v)

	o, err = ParseOptions(json.RawMessage(`{"values":{"telemetry":{"enabled":true}}}`))
	require.NoError(t, err, "values as an object")
	v, _ = valueAt(o.values, "telemetry", "enabled")
	assert.Equal(t, true, v)

	cases := map[string]struct{ raw, want string }{
		"values not YAML":     {`{"values":"sync:\n  toHost:\n    pods: [unclosed\n"}`, "spec.backend.vcluster.values: line 3"},
		"values bad indent":   {`{"values":"a: 1\n b: 2\n"}`, "spec.backend.vcluster.values: line 2"},
		"values a list":       {`{"values":"- a\n- b\n"}`, "spec.backend.vcluster.values: must be a mapping"},
		"values a number":     {`{"values":3}`, "spec.backend.vcluster.values: must be a YAML document"},
		"unknown field":       {`{"chartVerson":"0.34.0"}`, `spec.backend.vcluster: unknown field "chartVerson"`},
		"bad version":         {`{"chartVersion":"latest"}`, "spec.backend.vcluster.chartVersion: \"latest\" is not a chart version"},
		"relative chart path": {`{"chart":"charts/vcluster"}`, "spec.backend.vcluster.chart: \"charts/vcluster\": want an oci:// reference"},
		"oci without repo":    {`{"chart":"oci://ghcr.io"}`, "spec.backend.vcluster.chart: \"oci://ghcr.io\": an OCI reference names"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseOptions(json.RawMessage(tc.raw))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestValuesMergeInOrder(t *testing.T) {
	base := map[string]any{"a": map[string]any{"x": 1, "y": 2}, "list": []any{1, 2}}
	over := map[string]any{"a": map[string]any{"y": 3, "z": 4}, "list": []any{9}}
	got := mergeValues(base, over)
	assert.Equal(t, map[string]any{"a": map[string]any{"x": 1, "y": 3, "z": 4}, "list": []any{9}}, got)
	assert.Equal(t, 2, base["a"].(map[string]any)["y"], "the base is not modified")
	assert.Equal(t, map[string]any{"y": 3, "z": 4}, over["a"], "nor what is merged over it")

	// A null is kept, so that Helm drops the chart's default under it (as `--set x=null`).
	got = mergeValues(base, map[string]any{"a": map[string]any{"x": nil}})
	assert.Equal(t, map[string]any{"a": map[string]any{"x": nil, "y": 2}, "list": []any{1, 2}}, got)
	assert.Equal(t, base, mergeValues(base, nil))

	b := &Backend{cfg: Config{Values: map[string]any{"telemetry": map[string]any{"enabled": true}, "controlPlane": map[string]any{"statefulSet": map[string]any{"image": map[string]any{"tag": "op"}}}}}}
	o, err := ParseOptions(json.RawMessage(`{"values":"controlPlane:\n  statefulSet:\n    image:\n      tag: pool\n"}`))
	require.NoError(t, err)
	v := b.values(backends.InstanceSpec{KubernetesVersion: "v1.37.2"}, o)
	tag, _ := valueAt(v, "controlPlane", "statefulSet", "image", "tag")
	assert.Equal(t, "pool", tag, "the pool's values win")
	tel, _ := valueAt(v, "telemetry", "enabled")
	assert.Equal(t, true, tel, "the operator's win over kobe's")
	repo, _ := valueAt(v, "controlPlane", "statefulSet", "image", "repository")
	assert.Equal(t, "vcluster", repo, "kobe's stay where nobody overrides them")
	ver, _ := valueAt(v, "controlPlane", "distro", "k8s", "version")
	assert.Equal(t, "v1.37.2", ver, "spec.cluster.version picks the distro image")
}

func TestSourceKinds(t *testing.T) {
	for src, want := range map[string]string{
		"oci://ghcr.io/loft-sh/charts/vcluster": sourceOCI,
		"https://charts.loft.sh":                sourceRepo,
		"/opt/charts/vcluster":                  sourceLocal,
		"/opt/charts/vcluster-0.34.0.tgz":       sourceLocal,
	} {
		got, err := sourceKind(src)
		require.NoError(t, err, src)
		assert.Equal(t, want, got, src)
	}
}

func TestInvalidSpecsAreRefusedBeforeTheHost(t *testing.T) {
	b, err := New(Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}, Chart: "/nonexistent/chart"})
	require.NoError(t, err)
	for _, spec := range []backends.InstanceSpec{
		{ID: "Bad_ID"},
		{ID: "9starts-with-a-digit"},
		{ID: "ok", Options: json.RawMessage(`{"values":"a: [\n"}`)},
	} {
		err := b.Validate(spec)
		require.Error(t, err, spec.ID)
		assert.True(t, backends.IsInvalidSpec(err), "%s: %v", spec.ID, err)
	}
	require.NoError(t, b.Validate(backends.InstanceSpec{ID: "ok", Options: json.RawMessage(`{"values":"a: 1\n"}`)}))
	_, err = New(Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}, Chart: "charts/relative"})
	assert.ErrorContains(t, err, "want an oci:// reference")

	// A worker without a host cluster judges the spec all the same, and refuses to act.
	unavailable := &Backend{unavailable: "no host"}
	assert.NoError(t, unavailable.Validate(backends.InstanceSpec{ID: "ok"}))
	assert.True(t, backends.IsInvalidSpec(unavailable.Validate(backends.InstanceSpec{ID: "Bad"})))
	err = unavailable.Preflight(context.Background(), backends.InstanceSpec{ID: "ok"})
	assert.ErrorContains(t, err, "vcluster backend: no host")
	assert.False(t, backends.IsInvalidSpec(err), "an environment error, not the spec's")
	_, err = unavailable.Create(context.Background(), backends.InstanceSpec{ID: "ok"})
	assert.ErrorContains(t, err, "vcluster backend: no host")
}

func TestChartClusterNamesFollowTheChart(t *testing.T) {
	names := chartClusterNames("conf-1")
	assert.Equal(t, []string{"vc-conf-1-v-kobe-vcluster-conf-1", "vc-mn-conf-1-v-kobe-vcluster-conf-1"}, names)
	long := chartClusterNames("a-forty-character-instance-id-0123456789")
	for _, n := range long {
		assert.LessOrEqual(t, len(n), 63)
	}
}

func TestEndpointOfAService(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.77.20", Ports: []corev1.ServicePort{{Name: "https", Port: 443}, {Name: "kubelet", Port: 10250}}},
	}
	assert.Equal(t, "https://10.96.77.20:443", endpointOf(svc))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}
	assert.Equal(t, "https://192.0.2.7:443", endpointOf(svc))
	assert.Equal(t, "", endpointOf(nil))
}

// The messages are the host API's errors as the syncer wraps them in its SyncError events.
func TestSyncErrorsAreClassified(t *testing.T) {
	for msg, want := range map[string]api.ReasonCode{
		`Error syncing: create object: pods "x-x-default-x-vc" is forbidden: exceeded quota: full, requested: pods=1, used: pods=3, limited: pods=3`:                                             HostQuotaExceeded,
		`Error syncing: create object: pods "p-x-default-x-vc" is forbidden: violates PodSecurity "baseline:latest": privileged (container "main" must not set securityContext.privileged=true)`: SyncDenied,
		`Error syncing: admission webhook "policy.example.com" denied the request: no`:                                                                                                           SyncDenied,
		`Error syncing: services "web-x-default-x-vc" already exists`:                                                                                                                            SyncConflict,
		`Error syncing: Operation cannot be fulfilled on services "web": the object has been modified; please apply...`:                                                                          SyncConflict,
		`Error syncing: no matches for kind "Ingress" in version "networking.k8s.io/v1beta1"`:                                                                                                    UnsupportedResource,
		`Error syncing: something else broke`: SyncFailed,
	} {
		assert.Equal(t, want, classifySyncError(msg), msg)
	}
	errs := syncErrorsOf([]corev1.Event{
		{Reason: "Scheduled", Message: "not a sync error"},
		{Reason: "SyncError", Message: "Error syncing: x is forbidden: exceeded quota: q", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "a"}, Count: 3,
			LastTimestamp: metav1.NewTime(time.Unix(100, 0))},
		{Reason: "SyncError", Message: "Error syncing: already exists", InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "b"},
			LastTimestamp: metav1.NewTime(time.Unix(200, 0))},
	})
	require.Len(t, errs, 2)
	assert.Equal(t, SyncError{Reason: SyncConflict, Object: "Service default/b", Message: "Error syncing: already exists", Count: 1, Last: time.Unix(200, 0)}, errs[0], "newest first")
	assert.Equal(t, HostQuotaExceeded, errs[1].Reason)
}
