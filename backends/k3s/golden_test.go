package k3s_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/k3s"
	"github.com/kunobi-ninja/kobe/datastore"
)

// TestGoldenTemplateLeavesOutTheBuildersNodes: of the kine keys a golden builder with agents
// leaves in its database, the template keeps what every member should have (the addons'
// objects, the workloads' controllers) and leaves out what belongs to the builder's nodes: the
// Node objects, their heartbeat Leases, their CSINodes and VolumeAttachments, k3s's node-password Secrets, the pods
// (all bound to a builder's node) and the EndpointSlices that point at those pods. A member
// keeping them would list the builder's nodes as NotReady phantoms next to its own, and pods
// (and ready DNS endpoints) that run nowhere.
func TestGoldenTemplateLeavesOutTheBuildersNodes(t *testing.T) {
	builder := backends.GoldenBuilderID(backends.InstanceSpec{Pool: "gold", Golden: "0123456789"})
	server, agent := builder+"-server-0", builder+"-agent-0"
	nodes := []string{agent, server}

	kept := []string{
		"/registry/configmaps/golden/probe",
		"/registry/deployments/kube-system/coredns",
		"/registry/replicasets/kube-system/coredns-5b4c8d",
		"/registry/leases/kube-system/kube-controller-manager",
		"/registry/namespaces/kube-node-lease",
		"/registry/secrets/kube-system/k3s-serving2",
		"/registry/services/specs/kube-system/kube-dns",
		"/registry/serviceaccounts/golden/agent",
	}
	leftOut := []string{
		"/bootstrap/0123456789ab",
		"/registry/secrets/kube-system/k3s-serving",
		"/registry/minions/" + server,
		"/registry/minions/" + agent,
		"/registry/leases/kube-node-lease/" + server,
		"/registry/leases/kube-node-lease/" + agent,
		"/registry/csinodes/" + server,
		"/registry/csinodes/" + agent,
		"/registry/volumeattachments/csi-0f3a9c",
		"/registry/secrets/kube-system/" + server + ".node-password.k3s",
		"/registry/secrets/kube-system/" + agent + ".node-password.k3s",
		"/registry/pods/kube-system/coredns-5b4c8d-x2x7q",
		"/registry/pods/golden/web-0",
		"/registry/endpointslices/kube-system/kube-dns-8q2xl",
	}

	without := k3s.Distro.TemplateWithout(nodes)
	for _, k := range kept {
		assert.False(t, datastore.TemplateLeavesOut(k, without...), "the template keeps %s", k)
	}
	for _, k := range leftOut {
		assert.True(t, datastore.TemplateLeavesOut(k, without...), "the template leaves out %s", k)
	}
}
