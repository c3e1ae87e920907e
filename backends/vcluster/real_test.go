package vcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	leasecmd "github.com/kunobi-ninja/kobe/internal/cmd/lease"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster/images"
	"github.com/kunobi-ninja/kobe/worker"
)

// testValues are what an operator of this host sets: no PersistentVolume provisioner here (the
// datastore lives in an emptyDir), and the CoreDNS image the node has (or no CoreDNS).
func testValues(c *hostcluster.RealCluster) map[string]any {
	coredns := map[string]any{"enabled": false}
	if c.DNS {
		for _, name := range c.Images {
			if strings.HasPrefix(name, "registry.k8s.io/coredns/coredns:") {
				coredns = map[string]any{"enabled": true, "deployment": map[string]any{"image": name}}
			}
		}
	}
	return map[string]any{"controlPlane": map[string]any{
		"statefulSet": map[string]any{"persistence": map[string]any{"volumeClaim": map[string]any{"enabled": false}}},
		"coredns":     coredns,
	}}
}

// One real host cluster (a real node: kubelet, containerd, runc) for every subtest: the real
// chart installs the real syncer, whose control plane runs as a pod on the node.
func TestOnRealHostCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a host cluster with a real node and vclusters on it; skipped with -short")
	}
	chartDir, chartVersion := vcluster.ToolsChart(local.DefaultToolsDir())
	if chartDir == "" {
		t.Skipf("no vcluster chart in %s/versions.env: run `make tools` (hack/build-vcluster-tools.sh)", local.DefaultToolsDir())
	}
	c := hostcluster.StartReal(t, hostcluster.RealOptions{VClusterImages: true})
	require.Contains(t, c.Images, images.VClusterName(chartVersion))
	b, err := vcluster.New(vcluster.Config{
		REST: c.Config, Chart: chartDir, ChartVersion: chartVersion, Values: testValues(c),
		StateDir: t.TempDir(), PollInterval: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, id := range b.InstanceIDs() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			_ = b.Delete(ctx, id)
			cancel()
		}
		if t.Failed() {
			out, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
			t.Logf("host pods at the end:\n%s", out)
		}
	})
	spec := func(id string) backends.InstanceSpec {
		return backends.InstanceSpec{ID: id, Pool: "vc-test", KubernetesVersion: c.KubernetesVersion}
	}
	ctx := context.Background()

	t.Run("bad specs are refused at preflight", func(t *testing.T) {
		for name, tc := range map[string]struct {
			opts    string
			invalid bool
			want    string
		}{
			"unknown chart version": {`{"chartVersion":"0.33.9"}`, true, "is version " + chartVersion + ", not 0.33.9"},
			"values the schema refuses": {`{"values":"controlPlane:\n  statefulSet:\n    imagePullPolicy: 7\n"}`, true,
				"spec.backend.vcluster.values: the chart " + chartVersion + " refuses them"},
			"no chart at the path":       {`{"chart":"/nonexistent/vcluster"}`, true, "/nonexistent/vcluster"},
			"unreachable chart registry": {`{"chart":"oci://127.0.0.1:1/charts/vcluster","chartVersion":"0.34.0"}`, false, "127.0.0.1:1"},
		} {
			t.Run(name, func(t *testing.T) {
				s := spec("vc-bad")
				s.Options = json.RawMessage(tc.opts)
				err := b.Preflight(ctx, s)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				assert.Equal(t, tc.invalid, backends.IsInvalidSpec(err), "invalid spec (400) or environment (503): %v", err)
				_, err = b.Create(ctx, s)
				require.Error(t, err)
				_, err = b.Status(ctx, "vc-bad")
				assert.ErrorIs(t, err, backends.ErrNotFound, "a refused spec leaves nothing")
			})
		}
	})

	t.Run("a pod created in the vcluster runs on the host and its status comes back", func(t *testing.T) {
		id := "vc-pods"
		t0 := time.Now()
		_, err := b.Create(ctx, spec(id))
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		st, err := b.WaitReady(wctx, id, nil)
		require.NoError(t, err, "status: %+v", st)
		t.Logf("vcluster %s ready in %s at %s", id, time.Since(t0).Round(time.Millisecond), st.Endpoint)

		cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
		require.NoError(t, err)
		virtual := clientOf(t, cred.Kubeconfig)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr(int64(1)),
				Containers: []corev1.Container{{
					Name: "main", Image: images.BusyboxName, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sh", "-c", "echo started; exec sleep 3600"},
				}},
			},
		}
		// The service account the pod runs as appears shortly after the namespace's controller
		// manager starts.
		require.Eventually(t, func() bool {
			_, err = virtual.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err)
		}, 2*time.Minute, time.Second, "creating the pod in the vcluster: %v", err)

		var hostPod *corev1.Pod
		require.Eventually(t, func() bool {
			list, err := c.Client.CoreV1().Pods(vcluster.Namespace(id)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for i := range list.Items {
				p := &list.Items[i]
				if p.Annotations["vcluster.loft.sh/object-name"] == "sleeper" && p.Status.Phase == corev1.PodRunning {
					hostPod = p
					return true
				}
			}
			return false
		}, 3*time.Minute, time.Second, "the pod is synced to the host namespace and runs there")
		assert.Equal(t, c.NodeName, hostPod.Spec.NodeName, "it runs on the real node")
		t.Logf("host pod %s/%s runs on %s at %s", hostPod.Namespace, hostPod.Name, hostPod.Spec.NodeName, hostPod.Status.PodIP)

		require.Eventually(t, func() bool {
			p, err := virtual.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP == hostPod.Status.PodIP
		}, time.Minute, 500*time.Millisecond, "the host pod's status (Running, its address) comes back into the vcluster")
		require.NotEmpty(t, c.PodProcesses(string(hostPod.UID)), "the container runs as processes on this machine")

		t.Run("what the host refuses is reported with a reason", func(t *testing.T) {
			hostNS := vcluster.Namespace(id)
			syncError := func(object string) func() (vcluster.SyncError, bool) {
				return func() (vcluster.SyncError, bool) {
					errs, err := b.SyncErrors(ctx, id)
					if err != nil {
						return vcluster.SyncError{}, false
					}
					for _, e := range errs {
						if e.Object == object {
							return e, true
						}
					}
					return vcluster.SyncError{}, false
				}
			}
			waitFor := func(object string, reason api.ReasonCode) {
				t.Helper()
				var got vcluster.SyncError
				require.Eventually(t, func() bool {
					e, ok := syncError(object)()
					got = e
					return ok && e.Reason == reason
				}, 2*time.Minute, time.Second, "a %s sync error for %s (last seen: %+v)", reason, object, got)
				t.Logf("%s: %s: %s", object, got.Reason, got.Message)
			}

			// The host namespace enforces PodSecurity baseline: a privileged pod is refused there.
			ns, err := c.Client.CoreV1().Namespaces().Get(ctx, hostNS, metav1.GetOptions{})
			require.NoError(t, err)
			ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
			_, err = c.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
			require.NoError(t, err)
			privileged := pod.DeepCopy()
			privileged.Name, privileged.ResourceVersion = "privileged", ""
			privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
			_, err = virtual.CoreV1().Pods("default").Create(ctx, privileged, metav1.CreateOptions{})
			require.NoError(t, err, "the virtual cluster accepts it")
			waitFor("Pod default/privileged", vcluster.SyncDenied)

			// A ResourceQuota of the host namespace that its pods already fill.
			list, err := c.Client.CoreV1().Pods(hostNS).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			quota := &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: "full"},
				Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(list.Items)), resource.DecimalSI)}},
			}
			_, err = c.Client.CoreV1().ResourceQuotas(hostNS).Create(ctx, quota, metav1.CreateOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				q, err := c.Client.CoreV1().ResourceQuotas(hostNS).Get(ctx, "full", metav1.GetOptions{})
				return err == nil && len(q.Status.Hard) > 0
			}, time.Minute, 200*time.Millisecond, "the host's quota controller has counted the namespace")
			over := pod.DeepCopy()
			over.Name, over.ResourceVersion = "over-quota", ""
			_, err = virtual.CoreV1().Pods("default").Create(ctx, over, metav1.CreateOptions{})
			require.NoError(t, err)
			waitFor("Pod default/over-quota", vcluster.HostQuotaExceeded)
		})

		dctx, dcancel := context.WithTimeout(ctx, 3*time.Minute)
		defer dcancel()
		require.NoError(t, b.Delete(dctx, id))
		require.NoError(t, nothingLeft(c.Client, b)(id))
	})

	// The whole path of a sync error: kobe's pool and lease workflows on a worker with this
	// backend, the API: the lease's holder makes pods the host refuses, and the pool's health
	// check brings the syncer's errors to the lease (condition Synced), to `kobe lease get` and to
	// the audit log, each reason as the host produced it.
	t.Run("sync errors show on the lease, in kobe lease get and in the audit log", func(t *testing.T) {
		tmp := testsuite.StartTemporal(t)
		st := testsuite.NewStore(t, "sqlite")
		acts := worker.NewActivities(st, zap.NewNop())
		acts.Backends[vcluster.Name] = b
		acts.SharedQueue, acts.Secrets = "vcluster-sync", secretbox.Random()
		w := worker.New(tmp.Client, "vcluster-sync", acts)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		srv := httptest.NewServer((&server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "vcluster-sync",
			InsecureNoAuth: true, Secrets: acts.Secrets}).Handler())
		t.Cleanup(srv.Close)
		kobe, err := api.NewClient(srv.URL)
		require.NoError(t, err)
		lctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		defer cancel()

		_, _, err = kobe.ApplyPool(lctx, []byte(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"vc-sync"},
			"spec":{"ttl":"30m","scaling":{"minReady":1,"maxClusters":1},"healthCheck":{"intervalSeconds":2},
			"backend":{"type":"vcluster"},"cluster":{"version":"`+c.KubernetesVersion+`"}}}`))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			p, err := kobe.GetPool(lctx, "vc-sync")
			return err == nil && p.Ready == 1
		}, 6*time.Minute, time.Second, "a warm vcluster")
		l, _, err := kobe.CreateLease(lctx, api.LeaseRequest{Pool: "vc-sync"})
		require.NoError(t, err)
		// The warm member's holder was prepared when it became Ready: the lease is bound by the
		// create's own answer (a warm bind), with the holder's token.
		assert.Equal(t, api.LeaseBound, l.Phase, "a warm bind answers Bound")
		assert.Contains(t, l.Kubeconfig, "token:", "the holder's token, not a certificate")
		l, err = kobe.GetLease(lctx, l.ID, 2*time.Minute)
		require.NoError(t, err)
		require.Equal(t, api.LeaseBound, l.Phase)
		require.NotEmpty(t, l.Kubeconfig)
		id, virtual := l.ClusterName, clientOf(t, []byte(l.Kubeconfig))
		t.Logf("lease %s bound to %s", l.ID, id)

		synced := func(reason api.ReasonCode) api.LeaseCondition {
			t.Helper()
			var got []api.LeaseCondition
			var cond api.LeaseCondition
			require.Eventually(t, func() bool {
				l, err := kobe.GetLease(lctx, l.ID, 0)
				if err != nil {
					return false
				}
				got = l.Conditions
				for _, c := range l.Conditions {
					if c.Type == "Synced" && c.Status == "False" && c.Reason == reason {
						cond = c
						return true
					}
				}
				return false
			}, 3*time.Minute, time.Second, "condition Synced=False (%s) on GET /v1/leases/%s (last seen: %+v)", reason, l.ID, got)
			t.Logf("Synced=False (%s): %s", cond.Reason, cond.Message)
			return cond
		}
		pod := func(name string, privileged bool) *corev1.Pod {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr(int64(1)), Containers: []corev1.Container{{
					Name: "main", Image: images.BusyboxName, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}},
			}
			if privileged {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
			}
			return p
		}

		// sync_denied: the host namespace enforces PodSecurity baseline.
		hostNS := vcluster.Namespace(id)
		ns, err := c.Client.CoreV1().Namespaces().Get(lctx, hostNS, metav1.GetOptions{})
		require.NoError(t, err)
		ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		_, err = c.Client.CoreV1().Namespaces().Update(lctx, ns, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			_, err = virtual.CoreV1().Pods("default").Create(lctx, pod("privileged", true), metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err)
		}, 2*time.Minute, time.Second, "the virtual cluster accepts the pod: %v", err)
		denied := synced(api.ReasonSyncDenied)
		assert.Contains(t, denied.Message, "Pod default/privileged")
		// Deleted, it is not retried: the next refusal is the newest from then on.
		require.NoError(t, virtual.CoreV1().Pods("default").Delete(lctx, "privileged", metav1.DeleteOptions{}))

		// host_quota_exceeded: a host ResourceQuota its pods already fill.
		list, err := c.Client.CoreV1().Pods(hostNS).List(lctx, metav1.ListOptions{})
		require.NoError(t, err)
		_, err = c.Client.CoreV1().ResourceQuotas(hostNS).Create(lctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "full"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(list.Items)), resource.DecimalSI)}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			q, err := c.Client.CoreV1().ResourceQuotas(hostNS).Get(lctx, "full", metav1.GetOptions{})
			return err == nil && len(q.Status.Hard) > 0
		}, time.Minute, 200*time.Millisecond, "the host's quota controller has counted the namespace")
		_, err = virtual.CoreV1().Pods("default").Create(lctx, pod("over-quota", false), metav1.CreateOptions{})
		require.NoError(t, err)
		quota := synced(api.ReasonHostQuotaExceeded)
		assert.Contains(t, quota.Message, "Pod default/over-quota")

		// kobe lease get shows it as the holder sees it.
		ios, _, out, _ := iostreams.Test()
		f := &factory.Factory{IOStreams: ios, APIClient: func() (*api.Client, error) { return api.NewClient(srv.URL) }}
		require.NoError(t, cmdtest.Run(leasecmd.NewCmdGet(f, nil), l.ID))
		assert.Regexp(t, `Condition:\s+Synced=False \(host_quota_exceeded\): Pod default/over-quota`, out.String())

		// The audit log has each change once.
		events, err := kobe.ListAudit(lctx, api.AuditQuery{Action: lease.ActionLeaseCondition})
		require.NoError(t, err)
		var reasons []string
		for _, e := range events {
			assert.Equal(t, l.ID, e.Target)
			if e.Detail["type"] == "Synced" {
				reasons = append(reasons, fmt.Sprint(e.Detail["reason"]))
			}
		}
		// In the order they happened (a refusal of the vcluster's own objects may come first).
		denial, overQuota := slices.Index(reasons, string(api.ReasonSyncDenied)), slices.Index(reasons, string(api.ReasonHostQuotaExceeded))
		assert.True(t, denial >= 0 && overQuota > denial, "lease.condition events of Synced, in order: %v", reasons)

		// The pool deleted (it makes no new member), then the lease released: nothing of the
		// member is left on the host.
		_, err = kobe.DeletePool(lctx, "vc-sync")
		require.NoError(t, err)
		require.NoError(t, kobe.ReleaseLease(lctx, l.ID))
		require.NoError(t, tmp.Client.GetWorkflow(lctx, pool.WorkflowID("vc-sync"), "").Get(lctx, nil), "the pool drains and ends")
		require.NoError(t, nothingLeft(c.Client, b)(id))
	})

	// Figures for docs/backends.md, on demand (KOBE_VCLUSTER_MEASURE=<runs>): create → Ready of
	// one instance at a time, then the idle memory and CPU of the last one (every process of
	// every pod in its namespace: the control plane and CoreDNS).
	t.Run("create to ready, measured", func(t *testing.T) {
		runs, _ := strconv.Atoi(os.Getenv("KOBE_VCLUSTER_MEASURE"))
		if runs <= 0 {
			t.Skip("set KOBE_VCLUSTER_MEASURE=<runs> to measure create → Ready and idle resources")
		}
		var took []time.Duration
		for i := 0; i < runs; i++ {
			id := fmt.Sprintf("vc-measure-%d", i)
			t0 := time.Now()
			_, err := b.Create(ctx, spec(id))
			require.NoError(t, err)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			_, err = b.WaitReady(wctx, id, nil)
			cancel()
			require.NoError(t, err)
			took = append(took, time.Since(t0))
			t.Logf("run %d: create → Ready %s", i+1, took[i].Round(10*time.Millisecond))
			if i < runs-1 {
				dctx, dcancel := context.WithTimeout(ctx, 3*time.Minute)
				require.NoError(t, b.Delete(dctx, id))
				dcancel()
			}
		}
		sorted := append([]time.Duration(nil), took...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		t.Logf("create → Ready over %d runs: p50 %s, min %s, max %s", runs, sorted[len(sorted)/2].Round(10*time.Millisecond), sorted[0].Round(10*time.Millisecond), sorted[len(sorted)-1].Round(10*time.Millisecond))

		id := fmt.Sprintf("vc-measure-%d", runs-1)
		time.Sleep(30 * time.Second) // past start-up work (CoreDNS, leader election)
		pids := func() []int {
			list, err := c.Client.CoreV1().Pods(vcluster.Namespace(id)).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			var out []int
			for _, p := range list.Items {
				out = append(out, c.PodProcesses(string(p.UID))...)
			}
			return out
		}
		before := map[int]time.Duration{}
		for _, pid := range pids() {
			before[pid] = cpuTime(pid)
		}
		const window = 60 * time.Second
		time.Sleep(window)
		var rssKiB int64
		var cpu time.Duration
		for _, pid := range pids() {
			rssKiB += rss(pid)
			if b0, ok := before[pid]; ok {
				cpu += cpuTime(pid) - b0
			}
		}
		t.Logf("idle instance %s: %d processes, RSS %.0f MiB, CPU %.1f%% of one core over %s",
			id, len(before), float64(rssKiB)/1024, 100*cpu.Seconds()/window.Seconds(), window)
	})

	t.Run("conformance", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{
			Backend: b,
			Spec:    spec,
			InvalidSpecs: []backends.InstanceSpec{
				{ID: "Bad_ID", KubernetesVersion: c.KubernetesVersion},
				{ID: "conf-badvalues", KubernetesVersion: c.KubernetesVersion, Options: json.RawMessage(`{"values":"a: [\n"}`)},
				{ID: "conf-badversion", KubernetesVersion: c.KubernetesVersion, Options: json.RawMessage(`{"chartVersion":"0.1.0"}`)},
				{ID: "conf-unknownfield", KubernetesVersion: c.KubernetesVersion, Options: json.RawMessage(`{"replicas":3}`)},
			},
			ReadyWithin: 5 * time.Minute,
			Leftovers:   nothingLeft(c.Client, b),
		})
	})
}

// nothingLeft checks, beside the backend's own Leftovers, by name in the host: the namespace,
// Helm's release Secrets and the chart's cluster-scoped RBAC are gone.
func nothingLeft(host kubernetes.Interface, b *vcluster.Backend) func(id string) error {
	return func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var left []string
		if _, err := host.CoreV1().Namespaces().Get(ctx, vcluster.Namespace(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("namespace %s (%v)", vcluster.Namespace(id), err))
		}
		secrets, err := host.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + id})
		if err != nil {
			return err
		}
		for _, s := range secrets.Items {
			left = append(left, "release Secret "+s.Namespace+"/"+s.Name)
		}
		crs, err := host.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, r := range crs.Items {
			if strings.Contains(r.Name, vcluster.Namespace(id)) {
				left = append(left, "ClusterRole "+r.Name)
			}
		}
		crbs, err := host.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, r := range crbs.Items {
			if strings.Contains(r.Name, vcluster.Namespace(id)) {
				left = append(left, "ClusterRoleBinding "+r.Name)
			}
		}
		own, err := b.Leftovers(ctx, id)
		if err != nil {
			return err
		}
		left = append(left, own...)
		if len(left) > 0 {
			return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
		}
		return nil
	}
}

func clientOf(t *testing.T, kc []byte) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func ptr[T any](v T) *T { return &v }

// rss is a process's resident memory in KiB (VmRSS), 0 when it is gone.
func rss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is a process's user + system CPU time (clock ticks of 10 ms), 0 when it is gone.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (in parentheses, which may hold spaces): utime is the 14th
	// field of the line, stime the 15th.
	rest := string(data)
	if i := strings.LastIndex(rest, ")"); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}
