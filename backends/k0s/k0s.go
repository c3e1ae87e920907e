// Package k0s is kobe's k0s backend: an instance is a k0s cluster whose controller is a pod of a
// host Kubernetes cluster, running the k0sproject/k0s image of the pool's spec.cluster.version
// with a k0s.yaml kobe generates. The host-cluster side is shared with the k3s backend in
// backends/internal/hosted; this package says what is k0s's.
//
// Differences from k3s, explicit: the controller runs with --enable-worker (one pod is the
// whole cluster, as upstream kobe runs it); separate agents are refused (k0s workers join with
// a token the controller issues, which kobe does not do yet); the configuration is a file
// (k0s.yaml in a ConfigMap), not flags; k0s has one CA (pki/ca.crt) for servers and clients.
package k0s

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/hosted"
)

// Name is spec.backend.type for this backend.
const Name = "k0s"

// MinMinor is the oldest Kubernetes minor kobe's k0s backend runs.
const MinMinor = 28

func init() {
	backends.Register(backends.Factory{
		Name:        Name,
		Description: "k0s: a k0s cluster whose controller is a pod of a host cluster (--host-kubeconfig or in-cluster)",
		New: func(env backends.Environment) (backends.RuntimeBackend, error) {
			cfg, why := hosted.HostConfig(env)
			return hosted.New(Distro, hosted.Config{REST: cfg, Unavailable: why})
		},
		Prototype: hosted.Prototype(Distro),
		Traits:    backends.Traits{HostCluster: true, Hosted: true, Datastore: true, Golden: true, Sleep: true, PreparedCredentials: true},
		Options:   hosted.PoolOptions,
	})
}

var versionPattern = regexp.MustCompile(`^v1\.(\d+)\.(\d+)\+k0s\.(\d+)$`)

// Image is the k0sproject/k0s image of a k0s version (v1.32.1+k0s.0 → tag v1.32.1-k0s.0).
func Image(version string) (string, error) {
	m := versionPattern.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("spec.cluster.version: %q is not a k0s version such as v1.32.1+k0s.0", version)
	}
	if minor, _ := strconv.Atoi(m[1]); minor < MinMinor {
		return "", fmt.Errorf("spec.cluster.version: %s is older than the oldest k0s kobe runs (v1.%d)", version, MinMinor)
	}
	return "docker.io/k0sproject/k0s:" + strings.ReplaceAll(version, "+", "-"), nil
}

// Paths in the controller's pod.
const (
	DataDir   = "/var/lib/k0s"
	ConfigDir = "/etc/k0s"
)

// Distro is what makes the hosted backend k0s.
var Distro = hosted.Distro{
	Name:    Name,
	Image:   Image,
	DataDir: DataDir,
	// k0s takes a CA it finds in pki/ at first start instead of generating one.
	CAFiles: [][2]string{{"pki/ca.crt", "pki/ca.key"}},
	// k0s controllers each make their own ServiceAccount key unless they find one (a joining
	// controller gets it from a join token, which kobe does not use): kobe gives every
	// controller of an instance the same pair, so that HA controllers accept each other's tokens.
	ServiceAccountKeyFiles: &[2]string{"pki/sa.key", "pki/sa.pub"},
	ConfigDir:              ConfigDir,
	Unsupported:            unsupported,
	ServerCommand: func(in hosted.ServerInput) []string {
		cmd := []string{"k0s", "controller", "--config=" + ConfigDir + "/k0s.yaml", "--data-dir=" + DataDir, "--enable-worker", "--no-taints"}
		return append(cmd, in.Options.Cluster.ServerArgs...)
	},
	ConfigFiles: func(in hosted.ServerInput) (map[string]string, error) {
		cfg := map[string]any{
			"apiVersion": "k0s.k0sproject.io/v1beta1",
			"kind":       "ClusterConfig",
			"metadata":   map[string]any{"name": in.ID},
			"spec": map[string]any{
				"api":       map[string]any{"port": hosted.APIPort, "sans": in.SANs},
				"network":   map[string]any{"serviceCIDR": "10.43.0.0/16", "podCIDR": "10.42.0.0/16"},
				"storage":   storage(in),
				"telemetry": map[string]any{"enabled": false},
			},
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		return map[string]string{"k0s.yaml": string(out)}, nil
	},
}

// storage of k0s.yaml: its embedded etcd, or kine on the instance's own database of the shared
// datastore (spec.backend.datastore), which several controllers share (HA, as for k3s).
func storage(in hosted.ServerInput) map[string]any {
	if in.DatastoreEndpoint == "" {
		return map[string]any{"type": "etcd"}
	}
	return map[string]any{"type": "kine", "kine": map[string]any{"dataSource": in.DatastoreEndpoint}}
}

// unsupported refuses what kobe's k0s backend does not do.
func unsupported(p hosted.Parsed) error {
	if p.SharedDatastore.Golden() {
		// The shared code would copy the template as it does for k3s, but what k0s controllers
		// keep of the cluster's identity in the datastore is unchecked: no k0s runs here (the
		// Go module proxy refuses its modules), so which keys a template must leave out is not
		// known. Refused rather than guessed.
		return errors.New("spec.backend.datastore.goldenTemplates: not supported by kobe's k0s backend: which keys of the datastore k0s controllers keep the cluster's identity in has not been checked against a running k0s (none can be built here), so a template could hand the builder's keys to every member; golden templates work on the k3s and local backends")
	}
	return nil
}
