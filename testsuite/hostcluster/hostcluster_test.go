package hostcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
)

// A StatefulSet (which needs the controller-manager, the scheduler and kwok's kubelets) reaches
// Running pods on the host cluster's fake nodes.
func TestHostClusterRunsAStatefulSet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full control plane; skipped with -short")
	}
	c := hostcluster.Start(t, hostcluster.Options{Nodes: 3})
	ctx := context.Background()
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)

	replicas := int32(2)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres"}}},
			},
		},
	}
	_, err = c.Client.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err)
	t0 := time.Now()
	require.Eventually(t, func() bool {
		got, err := c.Client.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 2
	}, 2*time.Minute, 200*time.Millisecond)
	t.Logf("statefulset ready %s after create (cluster ready in %s)", time.Since(t0).Round(time.Millisecond), c.Ready.Round(time.Millisecond))
}
