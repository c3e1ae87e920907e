package vcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/backends"
)

// Reason codes of an instance on its way to Ready (in InstanceStatus.Message, which the
// instance's and the pool's status show). Stable: tools may match on them.
const (
	ReasonReleasePending      = "vcluster_release_pending"
	ReasonReleaseFailed       = "vcluster_release_failed"
	ReasonPodPending          = "vcluster_control_plane_pending"
	ReasonImageUnavailable    = "vcluster_image_unavailable"
	ReasonControlPlaneFailing = "vcluster_control_plane_crashing"
	ReasonControlPlaneStarted = "vcluster_control_plane_starting"
	ReasonServiceMissing      = "vcluster_service_missing"
	ReasonKubeconfigMissing   = "vcluster_kubeconfig_missing"
	ReasonAPIUnreachable      = "vcluster_api_unreachable"
	ReasonDeleting            = "vcluster_deleting"
)

// observation is what the host cluster shows of an instance.
type observation struct {
	ns         *corev1.Namespace
	release    *release.Release
	pod        *corev1.Pod // the control plane's (labels app=vcluster, release=<id>)
	service    *corev1.Service
	kubeconfig bool // Secret vc-<id> with key config
}

func (b *Backend) observe(ctx context.Context, id string, ns *corev1.Namespace) (observation, error) {
	o := observation{ns: ns}
	var err error
	if o.release, err = b.helm.lastRelease(ns.Name, id); err != nil {
		return o, err
	}
	// The chart runs the control plane as a StatefulSet (with a volume claim) or a Deployment
	// (without): its pods carry app=vcluster,release=<id>. The newest one speaks for it.
	pods, err := b.kube.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app=vcluster,release=" + id})
	if err != nil {
		return o, fmt.Errorf("vcluster host cluster: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && (o.pod == nil || p.CreationTimestamp.After(o.pod.CreationTimestamp.Time)) {
			o.pod = p
		}
	}
	svc, err := b.kube.CoreV1().Services(ns.Name).Get(ctx, id, metav1.GetOptions{})
	switch {
	case err == nil:
		o.service = svc
	case !apierrors.IsNotFound(err):
		return o, fmt.Errorf("vcluster host cluster: %w", err)
	}
	sec, err := b.kube.CoreV1().Secrets(ns.Name).Get(ctx, kubeconfigSecret(id), metav1.GetOptions{})
	switch {
	case err == nil:
		o.kubeconfig = len(sec.Data["config"]) > 0
	case !apierrors.IsNotFound(err):
		return o, fmt.Errorf("vcluster host cluster: %w", err)
	}
	return o, nil
}

// kubeconfigSecret is the Secret the syncer writes the admin kubeconfig to (key config).
func kubeconfigSecret(id string) string { return "vc-" + id }

// endpointOf is the address of the vcluster's Service that kobe and lease holders dial: a
// load balancer's address when the Service has one, else its ClusterIP (the syncer puts both
// in its serving certificate).
func endpointOf(svc *corev1.Service) string {
	if svc == nil {
		return ""
	}
	port := int32(443)
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" || len(svc.Spec.Ports) == 1 {
			port = p.Port
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		host := ing.IP
		if host == "" {
			host = ing.Hostname
		}
		if host != "" {
			return "https://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		return "https://" + net.JoinHostPort(ip, strconv.Itoa(int(port)))
	}
	return ""
}

// statusOf maps what the host shows to the backend's view of the instance.
func statusOf(id string, o observation) backends.InstanceStatus {
	st := backends.InstanceStatus{ID: id, CreatedAt: o.ns.CreationTimestamp.Time, Endpoint: endpointOf(o.service)}
	if o.ns.DeletionTimestamp != nil {
		st.Phase, st.Message = backends.PhaseUnhealthy, ReasonDeleting+": the namespace is being deleted"
		return st
	}
	reason, msg := progressOf(id, o)
	if reason == "" {
		st.Phase = backends.PhaseReady
		return st
	}
	st.Phase = backends.PhaseCreating
	if _, seen := o.ns.Annotations[readyAnnotation]; seen {
		st.Phase = backends.PhaseUnhealthy
	}
	if reason == ReasonReleaseFailed {
		st.Phase = backends.PhaseFailed
	}
	st.Message = reason + ": " + msg
	return st
}

// progressOf is the reason code and message of the first thing not there yet ("" when Ready).
func progressOf(id string, o observation) (string, string) {
	switch {
	case o.release == nil:
		return ReasonReleasePending, "no Helm release " + id + " yet"
	case o.release.Info.Status == release.StatusFailed:
		return ReasonReleaseFailed, "Helm release " + id + " failed: " + oneLine(o.release.Info.Description)
	case o.release.Info.Status != release.StatusDeployed:
		return ReasonReleasePending, "Helm release " + id + " is " + string(o.release.Info.Status)
	case o.pod == nil:
		return ReasonPodPending, "no control-plane pod (app=vcluster,release=" + id + ") yet"
	}
	if reason, msg := podTrouble(o.pod); reason != "" {
		return reason, msg
	}
	if !podReady(o.pod) {
		return ReasonControlPlaneStarted, "pod " + o.pod.Name + " is " + string(o.pod.Status.Phase) + ", not Ready yet"
	}
	if endpointOf(o.service) == "" {
		return ReasonServiceMissing, "Service " + id + " has no address"
	}
	if !o.kubeconfig {
		return ReasonKubeconfigMissing, "Secret " + kubeconfigSecret(id) + " does not exist yet"
	}
	return "", ""
}

// podTrouble names why the control-plane pod cannot start, if it cannot.
func podTrouble(p *corev1.Pod) (string, string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return ReasonPodPending, fmt.Sprintf("pod %s not scheduled: %s", p.Name, oneLine(c.Message))
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
			return ReasonImageUnavailable, fmt.Sprintf("container %s of pod %s: %s: %s", cs.Name, p.Name, w.Reason, oneLine(w.Message))
		case "CrashLoopBackOff", "CreateContainerError", "CreateContainerConfigError", "RunContainerError":
			msg := fmt.Sprintf("container %s of pod %s: %s", cs.Name, p.Name, w.Reason)
			if t := cs.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(" (exit %d: %s)", t.ExitCode, oneLine(t.Message))
			} else if w.Message != "" {
				msg += ": " + oneLine(w.Message)
			}
			return ReasonControlPlaneFailing, msg
		}
	}
	return "", ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
