package hosted

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kunobi-ninja/kobe/backends"
)

// Sleep keeps the cluster's state only where it outlives the pods: on claims or on a shared
// datastore.
func TestSleepRefusal(t *testing.T) {
	emptyDir := &appsv1.StatefulSet{}
	claims := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{}}}}
	why := sleepRefusal("k3s", instanceShape{Servers: 1}, emptyDir)
	assert.Contains(t, why, "emptyDir and has no shared datastore")
	assert.Contains(t, why, "spec.cluster.persistence.storageType pvc, or spec.backend.datastore")
	assert.Empty(t, sleepRefusal("k3s", instanceShape{Servers: 1}, claims))
	assert.Empty(t, sleepRefusal("k0s", instanceShape{Servers: 3, Datastore: &datastoreRef{SecretRef: "pg"}}, emptyDir))
}

func TestScalePatch(t *testing.T) {
	assert.JSONEq(t, `{"spec":{"replicas":0,"persistentVolumeClaimRetentionPolicy":{"whenScaled":"Retain"}}}`, string(scalePatch(0, true)))
	assert.JSONEq(t, `{"spec":{"replicas":3}}`, string(scalePatch(3, false)))
	assert.JSONEq(t, `{"metadata":{"annotations":{"kobe.kunobi.ninja/sleeping-since":null}}}`, string(sleepingPatch("")))
}

// sleepFixture is an instance's CA Secret and StatefulSets as Create leaves them, in a fake
// clientset (no controllers: the test plays the StatefulSet controller's part on the pods).
func sleepFixture(t *testing.T, shape instanceShape, pvc bool, extra ...runtime.Object) (*Backend, *fake.Clientset) {
	t.Helper()
	raw, _ := json.Marshal(shape)
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: caSecretName("i1"), Namespace: "ns",
		Labels:      labels(testDistro, "i1", "pool", ComponentCA),
		Annotations: map[string]string{shapeAnnotation: string(raw), readyAnnotation: "2026-01-01T00:00:00Z"}}}
	p := Parsed{Options: Options{Namespace: "ns"}, Servers: shape.Servers, Agents: shape.Agents, StorageType: StorageEmptyDir, ExposeType: ExposeClusterIP}
	if pvc {
		p.StorageType = StoragePVC
		p.Cluster.Persistence = &Persistence{StorageType: StoragePVC}
	}
	in := ServerInput{ID: "i1", Namespace: "ns", ServerURL: "https://i1.ns.svc:6443", Options: p}
	objs := append([]runtime.Object{ca, renderServers(testDistro, "i1", "pool", "rancher/k3s:v1.32.0-k3s1", in)}, extra...)
	if agents := renderAgents(testDistro, "i1", "pool", "rancher/k3s:v1.32.0-k3s1", in); agents != nil {
		objs = append(objs, agents)
	}
	kube := fake.NewSimpleClientset(objs...)
	return &Backend{distro: testDistro, kube: kube, poll: time.Millisecond, apiTimeout: time.Second}, kube
}

func replicas(t *testing.T, kube *fake.Clientset, name string) int32 {
	t.Helper()
	set, err := kube.AppsV1().StatefulSets("ns").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return *set.Spec.Replicas
}

func TestSleepOnEmptyDirIsRefusedAndChangesNothing(t *testing.T) {
	b, kube := sleepFixture(t, instanceShape{Servers: 1}, false)
	err := b.Sleep(context.Background(), "i1")
	require.ErrorIs(t, err, backends.ErrSleepRefused)
	assert.Contains(t, err.Error(), "would lose its state")
	assert.Equal(t, int32(1), replicas(t, kube, "i1-server"))
	ca, err := kube.CoreV1().Secrets("ns").Get(context.Background(), "i1-ca", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, ca.Annotations, sleepingAnnotation)
}

func TestSleepScalesToZeroKeepingClaimsAndResumeScalesBack(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "i1-server-0", Namespace: "ns", Labels: labels(testDistro, "i1", "pool", ComponentServer)}}
	b, kube := sleepFixture(t, instanceShape{Servers: 1, Agents: 2}, true, pod)
	ctx := context.Background()

	// While a server pod is left, Sleep does not return (here: until its context ends).
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := b.Sleep(short, "i1")
	cancel()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pods still there: i1-server-0")
	assert.Equal(t, int32(0), replicas(t, kube, "i1-server"))
	assert.Equal(t, int32(0), replicas(t, kube, "i1-agent"))
	set, err := kube.AppsV1().StatefulSets("ns").Get(ctx, "i1-server", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, set.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled,
		"the claims (the servers' data) are kept when scaled to 0")

	require.NoError(t, kube.CoreV1().Pods("ns").Delete(ctx, "i1-server-0", metav1.DeleteOptions{})) // the controller's part
	require.NoError(t, b.Sleep(ctx, "i1"))
	require.NoError(t, b.Sleep(ctx, "i1"), "sleeping a sleeping instance succeeds")
	st, err := b.Status(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseSleeping, st.Phase, st.Message)

	require.NoError(t, b.Resume(ctx, "i1"))
	assert.Equal(t, int32(1), replicas(t, kube, "i1-server"))
	assert.Equal(t, int32(2), replicas(t, kube, "i1-agent"))
	ca, err := kube.CoreV1().Secrets("ns").Get(ctx, "i1-ca", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, ca.Annotations, sleepingAnnotation)
	st, err = b.Status(ctx, "i1")
	require.NoError(t, err)
	assert.NotEqual(t, backends.PhaseSleeping, st.Phase, "awake: readiness as after Create (%s)", st.Message)
	require.NoError(t, b.Resume(ctx, "i1"), "resuming an awake instance succeeds")
}

// Sleep is a capability with a condition, and the matrix says which.
func TestSleepCapability(t *testing.T) {
	c := backends.CapabilitiesOf("k3s", "", Prototype(testDistro))
	assert.True(t, c.Sleep)
	assert.Equal(t, sleepNeeds, c.SleepRequires)
	b := Prototype(testDistro)
	assert.False(t, b.SleepsWith(nil), "an emptyDir and no datastore")
	assert.True(t, b.SleepsWith(json.RawMessage(`{"cluster":{"persistence":{"storageType":"pvc"}}}`)))
	assert.True(t, b.SleepsWith(json.RawMessage(`{"cluster":{"servers":3},"datastore":{"secretRef":"pg"}}`)))
}
