// Package k3s is kobe's k3s backend: an instance is a k3s cluster whose servers (and agents)
// are pods of a host Kubernetes cluster, running the rancher/k3s image of the pool's
// spec.cluster.version. The host-cluster side (objects, readiness, credentials, deletion) is
// shared with the k0s backend in backends/internal/hosted; this package says what is k3s's.
//
// The worker reaches its host cluster through its --host-kubeconfig ($KOBE_HOST_KUBECONFIG), or its in-cluster config.
package k3s

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/hosted"
)

// Name is spec.backend.type for this backend.
const Name = "k3s"

// MinMinor is the oldest Kubernetes minor kobe's k3s backend runs (k3s takes a CA it finds in
// its data directory; kobe's flags are those of current releases).
const MinMinor = 28

func init() {
	backends.Register(backends.Factory{
		Name:        Name,
		Description: "k3s: a k3s cluster whose servers and agents are pods of a host cluster (--host-kubeconfig or in-cluster)",
		New: func(env backends.Environment) (backends.RuntimeBackend, error) {
			cfg, why := hosted.HostConfig(env)
			return hosted.New(Distro, hosted.Config{REST: cfg, Unavailable: why})
		},
		Prototype: hosted.Prototype(Distro),
		Traits:    backends.Traits{HostCluster: true, Hosted: true, Datastore: true, Golden: true, Sleep: true, PreparedCredentials: true},
		Options:   hosted.PoolOptions,
	})
}

var versionPattern = regexp.MustCompile(`^v1\.(\d+)\.(\d+)\+k3s(\d+)$`)

// Image is the rancher/k3s image of a k3s version: the tag is the version with + replaced by -
// (v1.32.0+k3s1 → rancher/k3s:v1.32.0-k3s1), as k3s publishes it.
func Image(version string) (string, error) {
	m := versionPattern.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("spec.cluster.version: %q is not a k3s version such as v1.32.0+k3s1", version)
	}
	if minor, _ := strconv.Atoi(m[1]); minor < MinMinor {
		return "", fmt.Errorf("spec.cluster.version: %s is older than the oldest k3s kobe runs (v1.%d)", version, MinMinor)
	}
	return "rancher/k3s:" + strings.ReplaceAll(version, "+", "-"), nil
}

// DataDir of a k3s server in its pod.
const DataDir = "/var/lib/rancher/k3s"

// Distro is what makes the hosted backend k3s.
var Distro = hosted.Distro{
	Name:    Name,
	Image:   Image,
	DataDir: DataDir,
	// k3s takes the CAs it finds in server/tls at first start instead of generating them
	// ("custom CA certificates"); kobe's CA serves as both the server and the client CA.
	CAFiles: [][2]string{
		{"server/tls/server-ca.crt", "server/tls/server-ca.key"},
		{"server/tls/client-ca.crt", "server/tls/client-ca.key"},
	},
	// k3s's --datastore-endpoint, read from the environment: the instance's own database on the
	// shared datastore (spec.backend.datastore), which lets several servers form one cluster.
	DatastoreEnv:    "K3S_DATASTORE_ENDPOINT",
	TemplateWithout: templateWithout,
	Unsupported:     unsupported,
	ServerCommand: func(in hosted.ServerInput) []string {
		cmd := []string{"/bin/k3s", "server",
			"--data-dir=" + DataDir,
			"--token-file=" + in.TokenFile,
			fmt.Sprintf("--https-listen-port=%d", hosted.APIPort),
			"--service-cidr=10.43.0.0/16",
			"--cluster-cidr=10.42.0.0/16",
			// The pod's own address: k3s would pick the address of the default route's
			// interface, and a pod network need not give pods a default route.
			"--advertise-address=$(POD_IP)",
			"--node-ip=$(POD_IP)",
		}
		for _, san := range in.SANs {
			cmd = append(cmd, "--tls-san="+san)
		}
		return append(cmd, in.Options.Cluster.ServerArgs...)
	},
	AgentCommand: func(in hosted.ServerInput) []string {
		return []string{"/bin/k3s", "agent", "--server=" + in.ServerURL, "--token-file=" + in.TokenFile}
	},
}

// templateWithout is what a golden template is frozen without, given the builder's nodes:
//
//   - the servers' bootstrap data (storageKey of k3s's pkg/cluster: /bootstrap/<hash of the
//     token>, the CA keys, the service-account key, the encryption configuration, encrypted
//     with the builder's token) and the serving certificate's Secret, signed by the builder's
//     CA. A member bootstraps its own.
//   - the builder's nodes: every Node (all are the builder's: its servers with an agent and its
//     agents, named after its pods, which no member has), their heartbeat Leases in
//     kube-node-lease, their CSINodes, and k3s's Secret <node>.node-password.k3s of each. A
//     member keeping them would list NotReady phantom nodes next to its own.
//   - every pod: each ran on a builder's node (a pod bound to a Node that is gone is deleted by
//     the member's pod garbage collector anyway); the member's controllers make them again on
//     its own nodes. And every EndpointSlice: they point at those pods (a ready kube-dns
//     endpoint of the builder's would pass a member's DNSHealthy gate before its own DNS runs);
//     the member's controllers and API server make them again from its Services and Endpoints.
//     An addon's own EndpointSlice (not made from a Service) is lost with them: give such a
//     Service an Endpoints object instead, which is kept and mirrored.
//
// PersistentVolumes bound to a builder's node (local-path) are kept, with their node affinity:
// a pool whose addons claim node-local volumes should not use golden templates.
func templateWithout(builderNodes []string) []string {
	without := []string{
		"/bootstrap/",
		"/registry/secrets/kube-system/k3s-serving",
		"/registry/minions/",
		"/registry/leases/kube-node-lease/",
		"/registry/csinodes/",
		"/registry/volumeattachments/",
		"/registry/pods/",
		"/registry/endpointslices/",
	}
	for _, node := range builderNodes {
		without = append(without, "/registry/secrets/kube-system/"+node+".node-password.k3s")
	}
	return without
}

// unsupported refuses what kobe's k3s backend cannot do with a spec.
func unsupported(p hosted.Parsed) error {
	if p.SharedDatastore.Golden() {
		for _, a := range p.Cluster.ServerArgs {
			if a == "--secrets-encryption" || strings.HasPrefix(a, "--secrets-encryption=") {
				// The builder's Secrets are stored encrypted with a key of its bootstrap data,
				// which the template leaves out: no member could read them.
				return fmt.Errorf("spec.cluster.serverArgs: %s with spec.backend.datastore.goldenTemplates: the template's Secrets would be encrypted with the golden builder's key, which no member gets (each bootstraps its own); use one or the other", a)
			}
		}
	}
	return nil
}
