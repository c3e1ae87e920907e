// Package hosted is what kobe's k3s and k0s backends share: an instance is a set of objects in
// a host Kubernetes cluster (a CA Secret, a Service on 6443, a StatefulSet of servers, agents,
// a PodDisruptionBudget…) labelled with the instance, whose servers run the distribution's
// own image. The two backends differ only in what a Distro says: the image and version format,
// the server's command and configuration, and where the server finds the CA kobe gives it.
//
// kobe generates each instance's CA and hands it to the servers before they first start (an
// init container copies it into the data directory, where k3s and k0s take a CA they find
// instead of generating one). So kobe signs the admin credential and the per-lease credentials
// itself: nothing has to be read back out of a pod, no sidecar needs rights in the host
// cluster, and a per-lease certificate expires with the lease whatever happens to kobe.
package hosted

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Distro is what differs between k3s and k0s.
type Distro struct {
	// Name is spec.backend.type (k3s, k0s).
	Name string
	// Image returns the server image of a version (spec.cluster.version), or an error naming
	// the field when the version is not one of this distribution's.
	Image func(version string) (string, error)
	// DataDir is the server's data directory (a volume).
	DataDir string
	// CAFiles are where, relative to DataDir, the server takes a CA certificate and key it finds
	// at first start: pairs of (certificate path, key path).
	CAFiles [][2]string
	// ServiceAccountKeyFiles, when set, are where (relative to DataDir) the server takes the
	// ServiceAccount token signing key and its public key (private, public): kobe makes one
	// pair per instance, so that every server of an HA instance signs and accepts the same
	// tokens (k3s shares them through its datastore; k0s controllers do not).
	ServiceAccountKeyFiles *[2]string
	// ServerArgs is the server container's command line (after the image's entrypoint is
	// replaced: Command holds it whole).
	ServerCommand func(in ServerInput) []string
	// AgentCommand is an agent's command line; nil when the distribution's agents are not
	// supported (spec.cluster.agents > 0 is then refused).
	AgentCommand func(in ServerInput) []string
	// DatastoreEnv is the environment variable the server reads a shared datastore's URL from
	// (k3s: K3S_DATASTORE_ENDPOINT, its --datastore-endpoint); "" when the distribution takes it
	// in its configuration file instead (ServerInput.DatastoreEndpoint).
	DatastoreEnv string
	// ConfigFiles returns files the server reads (a Secret mounted at ConfigDir: they may hold
	// the datastore's password), or nil.
	ConfigFiles func(in ServerInput) (map[string]string, error)
	ConfigDir   string
	// TemplateWithout are the kine keys a golden template is frozen without
	// (datastore.FreezeTemplate), given the names of the golden builder's nodes (its Node
	// objects, read from its database at the freeze): what the servers keep of the cluster's
	// identity in the datastore, and what belongs to the builder's nodes, neither of which a
	// member may inherit from the builder (golden.go).
	TemplateWithout func(builderNodes []string) []string
	// Unsupported says, for a field the distribution refuses, why ("" = supported).
	Unsupported func(p Parsed) error
}

// ServerInput is what the server's command line and configuration are made of.
type ServerInput struct {
	ID, Namespace string
	// SANs are every name and address a client uses to reach the API (the Service's names, its
	// ClusterIP, node addresses for a NodePort).
	SANs []string
	// ServiceName is the instance's Service, ServerURL its in-cluster URL (agents join there).
	ServiceName, ServerURL string
	// TokenFile is the path of the join token inside the container.
	TokenFile string
	Options   Parsed
	// DatastoreEndpoint is the instance's own connection URL on the shared datastore ("": the
	// embedded one). A secret: only ConfigFiles may use it (they go into a Secret).
	DatastoreEndpoint string
}

// Paths inside every server container.
const (
	TokenDir = "/var/lib/kobe/token"
	CADir    = "/var/lib/kobe/ca"
)

func (d Distro) check() error {
	if d.Name == "" || d.Image == nil || d.ServerCommand == nil || d.DataDir == "" || len(d.CAFiles) == 0 {
		return fmt.Errorf("hosted: distro %q is incomplete", d.Name)
	}
	return nil
}

// PullPolicy of the servers: IfNotPresent, so that an image imported on the node (tests, air
// gapped hosts) runs, and a registry is asked only when the node lacks it.
const PullPolicy = corev1.PullIfNotPresent
