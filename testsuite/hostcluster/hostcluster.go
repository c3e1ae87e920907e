// Package hostcluster starts host Kubernetes clusters for tests of backends that run inside one
// (k3s, k0s, vcluster, Kamaji, Cluster API), as real processes.
//
// Start: kine, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake nodes
// — the local backend with every component, the same code kobe runs. Pods are scheduled and
// reported Running by kwok; nothing executes containers. Good for scheduling and scale.
//
// StartReal: the same control plane with a real node on this machine (kubelet, containerd,
// runc, kube-proxy, a CNI bridge, CoreDNS) that runs pods from images built locally (package
// images), plus kwok fake nodes if asked. Everything it changes on the machine is undone and
// checked at teardown (docs/hostcluster.md).
package hostcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
)

// Options of a host cluster.
type Options struct {
	// Nodes is the number of fake nodes (default 3).
	Nodes int
	// KubernetesVersion defaults to the newest one `make tools` built.
	KubernetesVersion string
	// APIOnly runs kine and kube-apiserver alone, without controller-manager, scheduler and
	// nodes: for tests of the API itself (custom resources, their validation), which start
	// faster and need fewer tools.
	APIOnly bool
}

// Cluster is a running host cluster.
type Cluster struct {
	Kubeconfig []byte
	Config     *rest.Config
	Client     kubernetes.Interface
	Endpoint   string
	// Ready is how long the start took.
	Ready time.Duration
}

// Start starts a host cluster and stops it (verified gone) when the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	tools := local.Tools{Dir: local.DefaultToolsDir()}
	if opts.KubernetesVersion == "" {
		versions := tools.KubernetesVersions()
		if len(versions) == 0 {
			t.Fatalf("hostcluster: no Kubernetes binaries in %s (run `make tools`)", tools.Dir)
		}
		opts.KubernetesVersion = versions[len(versions)-1]
	}
	b, err := local.New(local.Config{StateDir: t.TempDir(), HostID: "hostcluster", ToolsDir: tools.Dir})
	if err != nil {
		t.Fatal(err)
	}
	shape := local.Options{
		Components: []string{local.ComponentAPIServer, local.ComponentControllerManager, local.ComponentScheduler, local.ComponentKwok},
		Nodes:      opts.Nodes,
	}
	if opts.APIOnly {
		shape = local.Options{Components: []string{local.ComponentAPIServer}}
	}
	raw, _ := json.Marshal(shape)
	spec := backends.InstanceSpec{ID: "host", Pool: "hostcluster", KubernetesVersion: opts.KubernetesVersion, Options: raw}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	if _, err := b.Create(ctx, spec); err != nil {
		t.Fatalf("hostcluster: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Delete(context.Background(), spec.ID); err != nil {
			t.Errorf("hostcluster: delete: %v", err)
		}
	})
	st, err := b.WaitReady(ctx, spec.ID, nil)
	if err != nil {
		t.Fatalf("hostcluster: %v", err)
	}
	cred, err := b.Credentials(ctx, spec.ID, backends.CredentialRequest{})
	if err != nil {
		t.Fatalf("hostcluster: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	if err != nil {
		t.Fatalf("hostcluster: %v", err)
	}
	// Tests create many objects quickly; client-go's default 5 QPS would dominate their time.
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("hostcluster: %v", err)
	}
	c := &Cluster{Kubeconfig: cred.Kubeconfig, Config: cfg, Client: client, Endpoint: st.Endpoint, Ready: time.Since(t0)}
	if opts.APIOnly {
		t.Logf("hostcluster: %s (kube-apiserver alone) ready in %s", st.Endpoint, c.Ready.Round(time.Millisecond))
	} else {
		t.Logf("hostcluster: %s with %d fake nodes ready in %s", st.Endpoint, opts.Nodes, c.Ready.Round(time.Millisecond))
	}
	return c
}

// String names the cluster in test output.
func (c *Cluster) String() string { return fmt.Sprintf("hostcluster(%s)", c.Endpoint) }
