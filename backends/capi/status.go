package capi

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kunobi-ninja/kobe/backends"
)

// Reason codes of an instance on its way to Ready (in InstanceStatus.Message, which the
// instance's and the pool's status show). Stable: tools may match on them.
const (
	ReasonTopologyPending         = "capi_topology_pending"
	ReasonInfrastructurePending   = "capi_infrastructure_provisioning"
	ReasonControlPlaneInitPending = "capi_control_plane_initializing"
	ReasonControlPlaneUnavailable = "capi_control_plane_unavailable"
	ReasonWorkersUnavailable      = "capi_workers_unavailable"
	ReasonRemoteConnection        = "capi_remote_connection_failing"
	ReasonNotAvailable            = "capi_not_available"
	ReasonKubeconfigMissing       = "capi_kubeconfig_missing"
	ReasonDeleting                = "capi_deleting"
	ReasonFailed                  = "capi_failed"
)

// readyAnnotation marks a Cluster that kobe once saw Ready: afterwards a Cluster that is not
// Available is Unhealthy (it worked, now it does not), before it is still Creating.
const readyAnnotation = "kobe.kunobi.ninja/ready-at"

// step is one stage of a Cluster's way to Available, in the order CAPI passes them.
type step struct {
	condition string
	reason    string
}

var steps = []step{
	{"TopologyReconciled", ReasonTopologyPending}, // topology form only
	{"InfrastructureReady", ReasonInfrastructurePending},
	{"ControlPlaneInitialized", ReasonControlPlaneInitPending},
	{"ControlPlaneAvailable", ReasonControlPlaneUnavailable},
	{"WorkersAvailable", ReasonWorkersUnavailable},
	{"RemoteConnectionProbe", ReasonRemoteConnection},
	{"Available", ReasonNotAvailable},
}

type condition struct {
	Type, Status, Reason, Message string
}

// conditions reads the Cluster's v1beta2 conditions (status.conditions).
func conditions(c *unstructured.Unstructured) map[string]condition {
	out := map[string]condition{}
	list, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out[str("type")] = condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")}
	}
	return out
}

// Progress says how far a Cluster is on its way to Ready: the stages passed, of how many, and
// the reason code and message of the first stage not passed (empty when Ready).
type Progress struct {
	Done, Total int
	Reason      string
	Message     string
}

// progressOf maps a Cluster's conditions (and whether its kubeconfig Secret exists) to progress.
func progressOf(c *unstructured.Unstructured, kubeconfigExists bool) Progress {
	conds := conditions(c)
	_, topology, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "topology")
	p := Progress{}
	for _, s := range steps {
		if s.condition == "TopologyReconciled" && !topology {
			continue
		}
		p.Total++
		cond, ok := conds[s.condition]
		if ok && cond.Status == "True" {
			if p.Reason == "" {
				p.Done++
			}
			continue
		}
		if p.Reason != "" {
			continue
		}
		p.Reason = s.reason
		switch {
		case !ok:
			p.Message = s.condition + " not reported yet"
		default:
			p.Message = fmt.Sprintf("%s=%s (%s)", s.condition, cond.Status, cond.Reason)
			if msg := oneLine(cond.Message); msg != "" {
				p.Message += ": " + msg
			}
		}
	}
	p.Total++ // the kubeconfig Secret
	if kubeconfigExists {
		if p.Reason == "" {
			p.Done++
		}
	} else if p.Reason == "" {
		p.Reason, p.Message = ReasonKubeconfigMissing, "Secret "+c.GetName()+"-kubeconfig does not exist yet"
	}
	return p
}

// statusOf maps a Cluster to the backend's view of the instance.
func statusOf(id string, c *unstructured.Unstructured, kubeconfigExists bool) backends.InstanceStatus {
	st := backends.InstanceStatus{ID: id, CreatedAt: c.GetCreationTimestamp().Time}
	host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
	var port int64
	switch v, _, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "controlPlaneEndpoint", "port"); n := v.(type) {
	case int64:
		port = n
	case float64: // decoded from JSON by encoding/json rather than the API machinery
		port = int64(n)
	}
	if host != "" && port != 0 {
		st.Endpoint = fmt.Sprintf("https://%s:%d", host, port)
	}
	if c.GetDeletionTimestamp() != nil {
		st.Phase, st.Message = backends.PhaseUnhealthy, ReasonDeleting+": the Cluster is being deleted"
		return st
	}
	if reason, _, _ := unstructured.NestedString(c.Object, "status", "deprecated", "v1beta1", "failureReason"); reason != "" {
		msg, _, _ := unstructured.NestedString(c.Object, "status", "deprecated", "v1beta1", "failureMessage")
		st.Phase, st.Message = backends.PhaseFailed, fmt.Sprintf("%s: %s: %s", ReasonFailed, reason, oneLine(msg))
		return st
	}
	p := progressOf(c, kubeconfigExists)
	if p.Reason == "" {
		st.Phase = backends.PhaseReady
		return st
	}
	st.Phase = backends.PhaseCreating
	if _, seen := c.GetAnnotations()[readyAnnotation]; seen {
		st.Phase = backends.PhaseUnhealthy
	}
	st.Message = fmt.Sprintf("[%d/%d] %s: %s", p.Done, p.Total, p.Reason, p.Message)
	return st
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
