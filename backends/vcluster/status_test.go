package vcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/backends"
)

// Each way to Ready maps to its reason code and phase (the real test sees the happy path; these
// are the host's answers on the way, as objects).
func TestStatusReasons(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace("x"), CreationTimestamp: metav1.NewTime(time.Unix(10, 0))}}
	deployed := &release.Release{Info: &release.Info{Status: release.StatusDeployed}}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.77.9", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x-abc"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	waiting := func(reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions[1].Status = corev1.ConditionFalse
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "syncer", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}
		}
	}
	for name, tc := range map[string]struct {
		o      observation
		phase  backends.Phase
		reason string
	}{
		"no release":     {observation{}, backends.PhaseCreating, ReasonReleasePending},
		"release failed": {observation{release: &release.Release{Info: &release.Info{Status: release.StatusFailed, Description: "boom"}}}, backends.PhaseFailed, ReasonReleaseFailed},
		"installing":     {observation{release: &release.Release{Info: &release.Info{Status: release.StatusPendingInstall}}}, backends.PhaseCreating, ReasonReleasePending},
		"no pod":         {observation{release: deployed}, backends.PhaseCreating, ReasonPodPending},
		"unschedulable": {observation{release: deployed, pod: pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		})}, backends.PhaseCreating, ReasonPodPending},
		"image":      {observation{release: deployed, pod: pod(waiting("ImagePullBackOff"))}, backends.PhaseCreating, ReasonImageUnavailable},
		"crash loop": {observation{release: deployed, pod: pod(waiting("CrashLoopBackOff"))}, backends.PhaseCreating, ReasonControlPlaneFailing},
		"not ready":  {observation{release: deployed, pod: pod(func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse })}, backends.PhaseCreating, ReasonControlPlaneStarted},
		"no service": {observation{release: deployed, pod: pod(nil)}, backends.PhaseCreating, ReasonServiceMissing},
		"no secret":  {observation{release: deployed, pod: pod(nil), service: svc}, backends.PhaseCreating, ReasonKubeconfigMissing},
		"ready":      {observation{release: deployed, pod: pod(nil), service: svc, kubeconfig: true}, backends.PhaseReady, ""},
		"was ready, now crashing": {observation{release: deployed, pod: pod(waiting("CrashLoopBackOff")), service: svc, kubeconfig: true,
			ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{readyAnnotation: "t"}}}}, backends.PhaseUnhealthy, ReasonControlPlaneFailing},
		"deleting": {observation{ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Now()}}}}, backends.PhaseUnhealthy, ReasonDeleting},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.o.ns == nil {
				tc.o.ns = ns
			}
			st := statusOf("x", tc.o)
			assert.Equal(t, tc.phase, st.Phase, st.Message)
			if tc.reason == "" {
				assert.Empty(t, st.Message)
			} else {
				assert.Contains(t, st.Message, tc.reason+": ")
			}
		})
	}
}
