package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

const kubeVersion = "v1.37.2"

func newBackend(t *testing.T, state string) *local.Backend {
	t.Helper()
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (make test does it for you)", tools)
	}
	b, err := local.New(local.Config{StateDir: state, HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	return b
}

// frozenTestInstance is the start of the tests of freezing and thawing: a backend on a new state
// dir (returned) with a Ready instance id. They need real processes and a freezer cgroup.
func frozenTestInstance(t *testing.T, id string) (*local.Backend, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	skipWithoutFreezer(t)
	state := t.TempDir()
	b := newBackend(t, state)
	readyInstance(t, b, id)
	return b, state
}

// readyInstance creates instance id on b and waits until it is Ready (at most four minutes);
// the instance is deleted at the test's end.
func readyInstance(t *testing.T, b *local.Backend, id string) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	_, err := b.Create(ctx, spec(id, ""))
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)
}

func spec(id string, opts string) backends.InstanceSpec {
	s := backends.InstanceSpec{ID: id, Pool: "conformance", KubernetesVersion: kubeVersion}
	if opts != "" {
		s.Options = json.RawMessage(opts)
	}
	return s
}

func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	state := t.TempDir()
	b := newBackend(t, state)
	conformance.Run(t, conformance.Subject{
		Backend: b,
		Spec:    func(id string) backends.InstanceSpec { return spec(id, "") },
		InvalidSpecs: []backends.InstanceSpec{
			spec("Bad_ID", ""),
			{ID: "conf-badversion", KubernetesVersion: "v1.99.0"},
			spec("conf-badcomponent", `{"components":["apiserver","sheduler"]}`),
			spec("conf-unknownfield", `{"replicas":3}`),
		},
		ReadyWithin: 90 * time.Second,
		Leftovers: func(id string) error {
			dir := filepath.Join(state, "local", "instances", id)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return fmt.Errorf("%s remains", dir)
			}
			return nil
		},
	})
}

func TestValidationNamesTheField(t *testing.T) {
	b := newBackend(t, t.TempDir())
	cases := map[string]struct {
		spec backends.InstanceSpec
		want string
	}{
		"unknown version":    {backends.InstanceSpec{ID: "x", KubernetesVersion: "v1.2.3"}, `spec.cluster.version: Kubernetes "v1.2.3" is not available`},
		"missing version":    {backends.InstanceSpec{ID: "x"}, "spec.cluster.version: required"},
		"component typo":     {spec("x", `{"components":["apiserver","kowk"]}`), `spec.backend.local.components[1]: unknown component "kowk"`},
		"no apiserver":       {spec("x", `{"components":["scheduler"]}`), `must include "apiserver"`},
		"kwok alone":         {spec("x", `{"components":["apiserver","kwok"]}`), `"kwok" needs`},
		"nodes without kwok": {spec("x", `{"nodes":3}`), "spec.backend.local.nodes"},
		"unknown field":      {spec("x", `{"replicas":3}`), `spec.backend.local: json: unknown field "replicas"`},
		"bad id":             {spec("Not_A_Label", ""), `instance id "Not_A_Label"`},
		"duplicate":          {spec("x", `{"components":["apiserver","apiserver"]}`), "listed twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := b.Validate(tc.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	require.NoError(t, b.Validate(spec("ok", `{"components":["apiserver","controller-manager","scheduler","kwok"],"nodes":2}`)))
	assert.Empty(t, b.InstanceIDs(), "validation creates nothing")
}

func TestMatrixListsLocal(t *testing.T) {
	m := backends.Matrix()
	require.NotEmpty(t, m)
	var found bool
	for _, c := range m {
		if c.Backend == "local" {
			found = true
			assert.True(t, c.Sleep)
			assert.True(t, c.CertRotate)
			assert.True(t, c.HostBound)
			assert.Equal(t, "v1", c.Contract)
		}
	}
	assert.True(t, found)
	_ = context.Background()
}

// TestFullStackRunsPods: with controller-manager, scheduler and kwok, a Deployment's pods are
// scheduled onto fake nodes and reach Running.
func TestFullStackRunsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control-plane processes; skipped with -short")
	}
	b := newBackend(t, t.TempDir())
	ctx := context.Background()
	id := "full-stack"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	_, err := b.Create(ctx, spec(id, `{"components":["apiserver","controller-manager","scheduler","kwok"],"nodes":2}`))
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)
	t.Logf("full stack ready (2 nodes Ready) in %s", time.Since(t0).Round(time.Millisecond))

	cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
	require.NoError(t, err)
	c := kubeClient(t, cred.Kubeconfig)
	replicas := int32(3)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	_, err = c.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 3 {
			return false
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
				return false
			}
		}
		return true
	}, 90*time.Second, 250*time.Millisecond, "3 pods Running on fake nodes")
	t.Logf("deployment running %s after create", time.Since(t0).Round(time.Millisecond))
	require.NoError(t, b.Delete(ctx, id))
}

// TestReadoptionAfterRestart: a new Backend on the same state dir (kobe restarted, processes
// still running) adopts the instance instead of duplicating or leaking it; a crashed API server
// is then reported Unhealthy and not restarted behind the operator's back.
func TestReadoptionAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	state := t.TempDir()
	ctx := context.Background()
	b1 := newBackend(t, state)
	id := "adopt-me"
	t.Cleanup(func() { _ = b1.Delete(context.Background(), id) })
	_, err := b1.Create(ctx, spec(id, ""))
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st1, err := b1.WaitReady(wctx, id, nil)
	require.NoError(t, err)

	// Debris of a Create interrupted before its record was written is cleaned at start.
	debris := filepath.Join(state, "local", "instances", "half-made")
	require.NoError(t, os.MkdirAll(filepath.Join(debris, "pki"), 0o700))

	b2 := newBackend(t, state)
	assert.Equal(t, []string{id}, b2.InstanceIDs())
	_, err = os.Stat(debris)
	assert.True(t, os.IsNotExist(err), "debris removed")
	st2, err := b2.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseReady, st2.Phase)
	assert.Equal(t, st1.Endpoint, st2.Endpoint)
	assert.Len(t, apiserverPIDs(t, state), 1, "one API server, not two")

	// Create after adoption is still idempotent.
	st3, err := b2.Create(ctx, spec(id, ""))
	require.NoError(t, err)
	assert.Equal(t, st1.Endpoint, st3.Endpoint)
	assert.Len(t, apiserverPIDs(t, state), 1)

	// Crash the API server: reported Unhealthy with a reason, not restarted.
	for _, pid := range apiserverPIDs(t, state) {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	require.Eventually(t, func() bool {
		st, err := b2.Status(ctx, id)
		return err == nil && st.Phase == backends.PhaseUnhealthy && strings.Contains(st.Message, "apiserver")
	}, 10*time.Second, 100*time.Millisecond)
	time.Sleep(time.Second)
	assert.Empty(t, apiserverPIDs(t, state), "not silently restarted")
	st, _ := b2.Status(ctx, id)
	t.Logf("reported: %s: %s", st.Phase, st.Message)

	require.NoError(t, b2.Delete(ctx, id))
	assert.Empty(t, b2.InstanceIDs())
}

func apiserverPIDs(t *testing.T, state string) []int {
	t.Helper()
	var pids []int
	for _, p := range leaks.Named(leaks.ProcessesNaming(state), "kube-apiserver") {
		pids = append(pids, p.PID)
	}
	return pids
}

func kubeClient(t *testing.T, kc []byte) *kubernetes.Clientset {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// TestCreateInterruptedByACrash: kobe dies in the middle of Create — the record is written and
// kine runs, the API server never started — and comes back on the same state dir. The Create
// that the workflow retries finishes the start: the instance becomes ready with one kine and one
// API server. An instance left like that and only waited on (no Create retry) is reported Failed
// at once, naming the missing process, instead of the wait running into its timeout.
func TestCreateInterruptedByACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kine and kube-apiserver processes; skipped with -short")
	}
	state := t.TempDir()
	t.Cleanup(func() { leaks.KillNaming(state + "/") })
	ctx := context.Background()
	b1 := newBackend(t, state)
	ids := []string{"interrupted", "abandoned"}
	for _, id := range ids {
		_, err := b1.Create(ctx, spec(id, ""))
		require.NoError(t, err)
		// The crash came before the API server ran: no such process remains.
		dir := filepath.Join(state, "local", "instances", id) + "/"
		for _, p := range leaks.Named(leaks.ProcessesNaming(dir), "kube-apiserver") {
			require.NoError(t, syscall.Kill(p.PID, syscall.SIGKILL))
		}
		require.Eventually(t, func() bool { return len(leaks.Named(leaks.ProcessesNaming(dir), "kube-apiserver")) == 0 },
			10*time.Second, 20*time.Millisecond)
	}

	b2 := newBackend(t, state)
	t.Cleanup(func() {
		for _, id := range ids {
			_ = b2.Delete(context.Background(), id)
		}
	})
	st, err := b2.Create(ctx, spec("interrupted", ""))
	require.NoError(t, err, "the retried Create")
	assert.Equal(t, backends.PhaseCreating, st.Phase, st.Message)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err = b2.WaitReady(wctx, "interrupted", nil)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseReady, st.Phase)
	procs := leaks.ProcessesNaming(filepath.Join(state, "local", "instances", "interrupted") + "/")
	assert.Len(t, leaks.Named(procs, "kube-apiserver"), 1, "%v", procs)
	assert.Len(t, leaks.Named(procs, "kine"), 1, "the running kine is kept, not doubled: %v", procs)

	t0 := time.Now()
	wctx2, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	st, err = b2.WaitReady(wctx2, "abandoned", nil)
	require.Error(t, err)
	assert.Equal(t, backends.PhaseFailed, st.Phase)
	assert.Contains(t, st.Message, "apiserver is not running")
	assert.Less(t, time.Since(t0), 10*time.Second, "reported at once, not at the wait's deadline")
	t.Logf("abandoned: %s: %s", st.Phase, st.Message)

	for _, id := range ids {
		require.NoError(t, b2.Delete(ctx, id))
	}
	assert.Empty(t, leaks.ProcessesNaming(state+"/"))
}

// An instance whose Create is in flight when the backend stops creating is waited for and
// listed, so that deleting what InstanceIDs lists leaves nothing running; a Create after that is
// refused. Before, an ephemeral `kobe dev` listed its instances while a Create had written its
// directory but not yet recorded the instance: its kube-apiserver outlived the run (seen in
// TestDevStartsDefaultPool on a loaded machine).
func TestStopCreatingWaitsForACreateInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kine and kube-apiserver processes; skipped with -short")
	}
	state := t.TempDir()
	t.Cleanup(func() { leaks.KillNaming(state + "/") })
	b := newBackend(t, state)
	dir := filepath.Join(state, "local", "instances", "racing")
	done := make(chan error, 1)
	go func() {
		_, err := b.Create(context.Background(), spec("racing", ""))
		done <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(dir); return err == nil }, time.Minute, time.Millisecond,
		"the Create has started writing its instance")
	b.StopCreating()
	assert.Contains(t, b.InstanceIDs(), "racing", "the Create in flight recorded its instance before StopCreating returned")
	require.NoError(t, <-done)
	_, err := b.Create(context.Background(), spec("late", ""))
	require.ErrorContains(t, err, "stopping")
	for _, id := range b.InstanceIDs() {
		require.NoError(t, b.Delete(context.Background(), id))
	}
	assert.Empty(t, leaks.ProcessesNaming(state+"/"), "nothing of the listed instances runs")
	_, err = os.Stat(filepath.Join(state, "local", "instances", "late"))
	assert.True(t, os.IsNotExist(err), "a refused Create writes nothing")
}
