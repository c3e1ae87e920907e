package k3s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/hosted"
	"github.com/kunobi-ninja/kobe/backends/k3s"
	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
)

// The k3s that hack/build-k3s-tools.sh builds (and the rancher/k3s image made of it).
const version = "v1.32.0+k3s1"

// The locally built k3s has no bundled containerd or runc, so its servers run without their
// agent: a real k3s control plane (API server, controllers, kine on SQLite), no node. The
// add-ons k3s deploys would only wait for a node; they are switched off to spare the machine.
var testServerArgs = []string{"--disable-agent", "--disable=traefik,servicelb,metrics-server,local-storage,coredns"}

// spec of an instance with the test's server arguments; datastore, when given, is
// spec.backend.datastore.
func spec(id string, cluster map[string]any, datastore ...map[string]any) backends.InstanceSpec {
	if cluster == nil {
		cluster = map[string]any{}
	}
	if _, ok := cluster["serverArgs"]; !ok {
		cluster["serverArgs"] = testServerArgs
	}
	opts := map[string]any{"cluster": cluster}
	if len(datastore) > 0 {
		opts["datastore"] = datastore[0]
	}
	raw, _ := json.Marshal(opts)
	return backends.InstanceSpec{ID: id, Pool: "k3s-test", KubernetesVersion: version, Options: raw}
}

// One host cluster with a real node for every subtest: conformance on real k3s server pods,
// the refusals, and (when asked) the create→ready figure.
func TestOnRealHostCluster(t *testing.T) {
	c := hostcluster.StartReal(t, hostcluster.RealOptions{K3s: true})
	b, err := hosted.New(k3s.Distro, hosted.Config{REST: c.Config, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		ids, _ := b.InstanceIDs(ctx)
		if t.Failed() {
			for _, id := range ids {
				out, _ := c.Kubectl("logs", "-n", "default", id+"-server-0", "--tail=40")
				prev, _ := c.Kubectl("logs", "-n", "default", id+"-server-0", "--previous", "--tail=40")
				t.Logf("%s-server-0 log:\n%s\nprevious:\n%s", id, out, prev)
			}
		}
		for _, id := range ids {
			if err := b.Delete(ctx, id); err != nil {
				t.Errorf("cleanup of %s: %v", id, err)
			}
		}
		if t.Failed() {
			out, _ := c.Kubectl("get", "pods,statefulsets,services,secrets", "-A", "-l", hosted.LabelInstance, "-o", "wide")
			t.Logf("host objects at the end:\n%s", out)
		}
	})
	ctx := context.Background()

	t.Run("conformance", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{
			Backend:     b,
			Spec:        func(id string) backends.InstanceSpec { return spec(id, nil) },
			ReadyWithin: 3 * time.Minute,
			InvalidSpecs: []backends.InstanceSpec{
				{ID: "bad-version", Pool: "k3s-test", KubernetesVersion: "v1.32.0"},
				{ID: "bad-servers", Pool: "k3s-test", KubernetesVersion: version, Options: json.RawMessage(`{"cluster":{"servers":3}}`)},
				{ID: "bad-field", Pool: "k3s-test", KubernetesVersion: version, Options: json.RawMessage(`{"replicas":3}`)},
				{ID: "bad-ns", Pool: "k3s-test", KubernetesVersion: version, Options: json.RawMessage(`{"namespace":"no-such-namespace"}`)},
			},
			Leftovers: func(id string) error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				left, err := b.Leftovers(ctx, id)
				if err == nil && len(left) > 0 {
					err = fmt.Errorf("left behind: %s", strings.Join(left, ", "))
				}
				if err == nil {
					// Independently of labels: nothing named after the instance.
					err = namedAfter(ctx, c, id)
				}
				return err
			},
		})
	})

	t.Run("refused at apply, naming the field, nothing created", func(t *testing.T) {
		cases := []struct {
			spec backends.InstanceSpec
			want string
		}{
			{backends.InstanceSpec{ID: "r1", KubernetesVersion: "v1.32.0+k0s.0"}, `spec.cluster.version: "v1.32.0+k0s.0" is not a k3s version`},
			{backends.InstanceSpec{ID: "r2", KubernetesVersion: "v1.20.0+k3s1"}, "spec.cluster.version: v1.20.0+k3s1 is older than"},
			{spec("r3", map[string]any{"servers": 3}), "spec.cluster.servers: 3 servers need a shared datastore (spec.backend.datastore)"},
			{backends.InstanceSpec{ID: "r4", KubernetesVersion: version, Options: json.RawMessage(`{"datastore":{"secretRef":"no-such-secret"}}`)}, "spec.backend.datastore.secretRef: the host cluster has no Secret default/no-such-secret"},
			{spec("r5", map[string]any{"expose": map[string]any{"exposeType": "ingress"}}), "spec.cluster.expose.exposeType: ingress is not supported by kobe: the instance's API needs TLS passed through"},
			{spec("r6", map[string]any{"persistence": map[string]any{"storageType": "tmpfs"}}), `spec.cluster.persistence.storageType: "tmpfs"`},
			{spec("r7", map[string]any{"serverArgs": []string{"disable-agent"}}), `spec.cluster.serverArgs[0]: "disable-agent" is not a flag`},
			{backends.InstanceSpec{ID: "r8", KubernetesVersion: version, Options: json.RawMessage(`{"namespace":"nowhere"}`)}, `spec.backend.k3s.namespace: the host cluster has no namespace "nowhere"`},
			{backends.InstanceSpec{ID: "r9", KubernetesVersion: version, Options: json.RawMessage(`{"resources":{"limits":{"gpu":"1"}}}`)}, "spec.resources.limits.gpu: not a resource kobe sets"},
		}
		for _, tc := range cases {
			err := b.Preflight(ctx, tc.spec)
			require.Error(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, backends.IsInvalidSpec(err), "a spec refusal (400 at apply), not an outage: %v", err)
			_, err = b.Create(ctx, tc.spec)
			require.Error(t, err)
			left, err := b.Leftovers(ctx, tc.spec.ID)
			require.NoError(t, err)
			assert.Empty(t, left, "a refused spec leaves nothing")
		}
	})

	t.Run("what the host would refuse is refused at preflight (server-side dry-run)", func(t *testing.T) {
		// A namespace whose quota allows no Secret: the host's admission refuses the instance's
		// CA Secret, and Preflight says so before anything exists.
		_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quota-tiny"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.Client.CoreV1().ResourceQuotas("quota-tiny").Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "no-secrets"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceSecrets: resource.MustParse("0")}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		s := backends.InstanceSpec{ID: "quota", Pool: "k3s-test", KubernetesVersion: version, Options: json.RawMessage(`{"namespace":"quota-tiny"}`)}
		require.Eventually(t, func() bool {
			err = b.Preflight(ctx, s)
			return err != nil
		}, 30*time.Second, 500*time.Millisecond, "the quota is seen")
		assert.Contains(t, err.Error(), "quota")
		left, lerr := b.Leftovers(ctx, "quota")
		require.NoError(t, lerr)
		assert.Empty(t, left)
	})

	t.Run("the host accepts agents, claims, a NodePort and resources (server-side dry-run)", func(t *testing.T) {
		s := spec("dry", map[string]any{
			"agents":      2,
			"persistence": map[string]any{"storageType": "pvc", "storageClassName": "standard", "storageRequestSize": "5Gi"},
			"expose":      map[string]any{"exposeType": "NodePort", "nodePort": 31443},
		})
		var opts map[string]any
		require.NoError(t, json.Unmarshal(s.Options, &opts))
		opts["resources"] = map[string]any{"requests": map[string]string{"cpu": "250m", "memory": "512Mi"}, "limits": map[string]string{"memory": "1Gi"}}
		s.Options, _ = json.Marshal(opts)
		require.NoError(t, b.Preflight(ctx, s))
		left, err := b.Leftovers(ctx, "dry")
		require.NoError(t, err)
		assert.Empty(t, left, "a dry-run keeps nothing")
	})

	t.Run("exposed as a NodePort: the kubeconfig reaches the API through the node", func(t *testing.T) {
		const id = "nodeport"
		_, err := b.Create(ctx, spec(id, map[string]any{"expose": map[string]any{"exposeType": "NodePort"}}))
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		st, err := b.WaitReady(wctx, id, nil)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(st.Endpoint, "https://"+c.NodeIP+":"), "the node's address: %s", st.Endpoint)
		cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
		require.NoError(t, err)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
		require.NoError(t, err)
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		v, err := client.Discovery().ServerVersion()
		require.NoError(t, err)
		assert.Equal(t, version, v.GitVersion)
		require.NoError(t, b.Delete(wctx, id))
	})

	t.Run("sleep: one server on a shared PostgreSQL scaled to 0 and back, its data kept", func(t *testing.T) {
		pg := sharedPostgres(t, c)
		const id = "sleepy"
		_, err := b.Create(ctx, spec(id, nil, pg.datastore))
		require.NoError(t, err)
		t.Cleanup(func() {
			dctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			_ = b.Delete(dctx, id) // while PostgreSQL is reachable, so that its database goes too
		})
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		_, err = b.WaitReady(wctx, id, nil)
		require.NoError(t, err)
		cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
		require.NoError(t, err)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
		require.NoError(t, err)
		cfg.Timeout = 10 * time.Second
		admin, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"},
			Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		require.NoError(t, b.Sleep(wctx, id), "returns once no server pod is left")
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: hosted.LabelInstance + "=" + id})
		require.NoError(t, err)
		assert.Empty(t, pods.Items, "no pod of the instance is left")
		st, err := b.Status(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, backends.PhaseSleeping, st.Phase, st.Message)
		_, err = admin.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		require.Error(t, err, "asleep, the cluster does not serve")

		started := time.Now()
		require.NoError(t, b.Resume(wctx, id))
		_, err = b.WaitReady(wctx, id, nil)
		require.NoError(t, err)
		t.Logf("resume → ready in %s", time.Since(started).Round(time.Millisecond))
		got, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		require.NoError(t, err, "awake, the same kubeconfig works")
		assert.Equal(t, "v", got.Data["k"], "the object made before the sleep is still there")
	})

	t.Run("HA: 3 servers on a shared PostgreSQL", func(t *testing.T) {
		pg := sharedPostgres(t, c)
		t.Cleanup(func() {
			// Whatever a failed subtest left, deleted while PostgreSQL is still reachable (the
			// forwarder stops after this), so that its database is dropped too.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ids, _ := b.InstanceIDs(ctx)
			for _, id := range ids {
				if err := b.Delete(ctx, id); err != nil {
					t.Errorf("cleanup of %s: %v", id, err)
				}
			}
		})
		haSpec := func(id string) backends.InstanceSpec { return spec(id, map[string]any{"servers": 3}, pg.datastore) }

		t.Run("conformance", func(t *testing.T) {
			conformance.Run(t, conformance.Subject{
				Backend:     b,
				Spec:        haSpec,
				ReadyWithin: 5 * time.Minute,
				InvalidSpecs: []backends.InstanceSpec{
					spec("ha-no-key", map[string]any{"servers": 3}, map[string]any{"secretRef": pg.secret, "secretKey": "nope"}),
				},
				Leftovers: func(id string) error {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					left, err := b.Leftovers(ctx, id)
					if err == nil && len(left) > 0 {
						return fmt.Errorf("left behind in the host: %s", strings.Join(left, ", "))
					}
					if err != nil {
						return err
					}
					if err := namedAfter(ctx, c, id); err != nil {
						return err
					}
					// And in PostgreSQL: no database, no role of the instance.
					dbs, err := pg.server.Leftovers(ctx, id)
					if err == nil && len(dbs) > 0 {
						err = fmt.Errorf("left behind in PostgreSQL: %s", strings.Join(dbs, ", "))
					}
					return err
				},
			})
		})

		t.Run("one cluster: what one server stores, every server serves; a PDB keeps two up", func(t *testing.T) {
			const id = "ha-one"
			_, err := b.Create(ctx, haSpec(id))
			require.NoError(t, err)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			_, err = b.WaitReady(wctx, id, nil)
			require.NoError(t, err)

			name, err := pg.server.Name(id)
			require.NoError(t, err)
			dbs, err := pg.server.Leftovers(ctx, id)
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"database " + name, "role " + name}, dbs, "the instance's own database and role")
			dsn, err := b.DatastoreEndpoint(ctx, id)
			require.NoError(t, err)
			assert.Contains(t, dsn.Reveal(), "@"+pg.address+"/"+name, "the servers reach PostgreSQL through the node's address")

			set, err := c.Client.AppsV1().StatefulSets("default").Get(ctx, id+"-server", metav1.GetOptions{})
			require.NoError(t, err)
			env := set.Spec.Template.Spec.Containers[0].Env
			require.Len(t, env, 2)
			assert.Equal(t, "K3S_DATASTORE_ENDPOINT", env[1].Name)
			require.NotNil(t, env[1].ValueFrom.SecretKeyRef, "the URL comes from a Secret")
			assert.Empty(t, env[1].Value)
			assert.NotContains(t, strings.Join(set.Spec.Template.Spec.Containers[0].Command, " "), "postgres", "no URL on the command line")

			pdb, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, id+"-server", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, int32(1), pdb.Spec.MaxUnavailable.IntVal)
			require.Eventually(t, func() bool {
				pdb, err = c.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, id+"-server", metav1.GetOptions{})
				return err == nil && pdb.Status.CurrentHealthy == 3 && pdb.Status.DisruptionsAllowed == 1
			}, time.Minute, 500*time.Millisecond, "the PDB sees 3 healthy servers, allows 1 disruption")

			cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
			require.NoError(t, err)
			cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
			require.NoError(t, err)
			client, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "written-once"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: hosted.LabelInstance + "=" + id + "," + hosted.LabelComponent + "=server"})
			require.NoError(t, err)
			require.Len(t, pods.Items, 3)
			for _, pod := range pods.Items {
				// Each server directly (its pod address, the certificate checked for the Service's name).
				direct := rest.CopyConfig(cfg)
				direct.Host = "https://" + pod.Status.PodIP + ":6443"
				direct.TLSClientConfig.ServerName = id + ".default.svc"
				dc, err := kubernetes.NewForConfig(direct)
				require.NoError(t, err)
				got, err := dc.CoreV1().ConfigMaps("default").Get(ctx, "written-once", metav1.GetOptions{})
				require.NoError(t, err, "server %s", pod.Name)
				assert.Equal(t, "v", got.Data["k"], "server %s", pod.Name)
			}

			require.NoError(t, b.Delete(wctx, id))
			dbs, err = pg.server.Leftovers(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, dbs, "Delete drops the database and the role")
		})

		t.Run("a stale database of the same id is not taken over", func(t *testing.T) {
			// What an earlier instance of this id left (its drop never happened): k3s would find
			// bootstrap data encrypted with another token and refuse to start.
			const id = "ha-stale"
			_, err := b.Create(ctx, haSpec(id))
			require.NoError(t, err)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			_, err = b.WaitReady(wctx, id, nil)
			require.NoError(t, err)
			// The instance's objects go, its database stays (as a Delete interrupted before the drop).
			_, err = c.Kubectl("delete", "secret", id+"-ca", "--wait=true")
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				left, err := b.Leftovers(ctx, id)
				return err == nil && len(left) == 0
			}, 2*time.Minute, time.Second, "the host's garbage collector removes what the CA owned")
			dbs, err := pg.server.Leftovers(ctx, id)
			require.NoError(t, err)
			require.NotEmpty(t, dbs, "the stale database")

			_, err = b.Create(ctx, haSpec(id))
			require.NoError(t, err)
			_, err = b.WaitReady(wctx, id, nil)
			require.NoError(t, err, "a new instance of the id starts on a fresh database")
			require.NoError(t, b.Delete(wctx, id))
		})

		t.Run("bad datastore input is refused at preflight, nothing created", func(t *testing.T) {
			_, err := c.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "pg-down"},
				Data:       map[string][]byte{"connection-url": []byte("postgres://postgres:hunter2@" + c.NodeIP + ":1/postgres?sslmode=disable")},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = c.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "redis"},
				Data:       map[string][]byte{"connection-url": []byte("redis://" + c.NodeIP + ":6379")},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			cases := []struct {
				spec    backends.InstanceSpec
				want    string
				invalid bool
			}{
				{spec("d1", map[string]any{"servers": 3}, map[string]any{"secretRef": "absent"}), "spec.backend.datastore.secretRef: the host cluster has no Secret default/absent", true},
				{spec("d2", nil, map[string]any{"secretRef": pg.secret, "secretKey": "url"}), `spec.backend.datastore.secretKey: Secret default/` + pg.secret + ` has no key "url"`, true},
				{spec("d3", nil, map[string]any{"secretRef": "redis"}), `unsupported datastore scheme "redis"`, true},
				{spec("d4", map[string]any{"serverArgs": []string{"--disable-agent", "--secrets-encryption"}}, map[string]any{"secretRef": pg.secret, "goldenTemplates": true}), "spec.cluster.serverArgs: --secrets-encryption with spec.backend.datastore.goldenTemplates", true},
				{spec("d5", nil, map[string]any{"secretRef": "pg-down"}), "cannot reach the postgres datastore postgres://postgres:xxxxx@" + c.NodeIP + ":1", false},
			}
			for _, tc := range cases {
				err := b.Preflight(ctx, tc.spec)
				require.Error(t, err, tc.want)
				assert.Contains(t, err.Error(), tc.want)
				assert.NotContains(t, err.Error(), "hunter2", "no password in an error")
				assert.Equal(t, tc.invalid, backends.IsInvalidSpec(err), "only an unreachable server is not the spec's fault: %v", err)
				_, err = b.Create(ctx, tc.spec)
				require.Error(t, err)
				left, err := b.Leftovers(ctx, tc.spec.ID)
				require.NoError(t, err)
				assert.Empty(t, left, "a refused spec leaves nothing in the host")
				dbs, err := pg.server.Leftovers(ctx, tc.spec.ID)
				require.NoError(t, err)
				assert.Empty(t, dbs, "nor in PostgreSQL")
			}
		})

		t.Run("create to ready, 10 runs (KOBE_K3S_MEASURE=1)", func(t *testing.T) {
			measure(t, b, haSpec, "k3s servers:3 on PostgreSQL", 5*time.Minute)
		})
	})

	t.Run("exposed as a LoadBalancer: the servers wait for its address, the kubeconfig reaches the API through it", func(t *testing.T) {
		// This host has no load-balancer controller: the test plays one, giving the Service an
		// address on the node's bridge that kube-proxy then routes to the servers, as it does
		// for the addresses a cloud's controller writes.
		const id = "lb"
		lbIP := net.ParseIP(c.NodeIP).To4()
		require.NotNil(t, lbIP)
		lbIP = append(net.IP{}, lbIP...)
		lbIP[3] = 250
		created := make(chan error, 1)
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		go func() {
			_, err := b.Create(cctx, spec(id, map[string]any{"expose": map[string]any{"exposeType": "LoadBalancer"}}))
			created <- err
		}()
		var svc *corev1.Service
		require.Eventually(t, func() bool {
			var err error
			svc, err = c.Client.CoreV1().Services("default").Get(ctx, id, metav1.GetOptions{})
			return err == nil
		}, time.Minute, 200*time.Millisecond)
		assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
		_, err := c.Client.AppsV1().StatefulSets("default").Get(ctx, id+"-server", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no server before the load balancer has an address: %v", err)
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP.String()}}
		_, err = c.Client.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, <-created)
		st, err := b.WaitReady(cctx, id, nil)
		require.NoError(t, err)
		assert.Equal(t, "https://"+lbIP.String()+":6443", st.Endpoint)
		cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
		require.NoError(t, err)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
		require.NoError(t, err)
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		v, err := client.Discovery().ServerVersion()
		require.NoError(t, err, "the certificate names the load balancer's address")
		assert.Equal(t, version, v.GitVersion)
		require.NoError(t, b.Delete(cctx, id))
	})

	t.Run("a LoadBalancer that never gets an address: Create says so, Delete cleans up", func(t *testing.T) {
		const id = "lb-none"
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := b.Create(cctx, spec(id, map[string]any{"expose": map[string]any{"exposeType": "LoadBalancer"}}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "got no load balancer address: does the host cluster run a load-balancer controller?")
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, b.Delete(dctx, id))
		left, err := b.Leftovers(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, left)
	})

	t.Run("create to ready, 10 runs (KOBE_K3S_MEASURE=1)", func(t *testing.T) {
		measure(t, b, func(id string) backends.InstanceSpec { return spec(id, nil) }, "k3s", 3*time.Minute)
	})
}

// measure logs create→ready (and delete) over 10 runs, one instance at a time.
func measure(t *testing.T, b *hosted.Backend, spec func(id string) backends.InstanceSpec, what string, within time.Duration) {
	if os.Getenv("KOBE_K3S_MEASURE") == "" {
		t.Skip("a figure, not a check: set KOBE_K3S_MEASURE=1 to measure create→ready over 10 runs")
	}
	ctx := context.Background()
	var took []time.Duration
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("measure-%d", i)
		t0 := time.Now()
		_, err := b.Create(ctx, spec(id))
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, within)
		_, err = b.WaitReady(wctx, id, nil)
		cancel()
		require.NoError(t, err)
		took = append(took, time.Since(t0))
		t.Logf("run %d: create→ready %s", i+1, took[i].Round(10*time.Millisecond))
		dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		t0 = time.Now()
		require.NoError(t, b.Delete(dctx, id))
		cancel()
		t.Logf("run %d: delete %s", i+1, time.Since(t0).Round(10*time.Millisecond))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("%s create→ready over %d runs: min %s, p50 %s, max %s", what, len(took),
		took[0].Round(10*time.Millisecond), took[len(took)/2].Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond))
}

// namedAfter finds objects whose name starts with the instance's id, whatever their labels.
func namedAfter(ctx context.Context, c *hostcluster.RealCluster, id string) error {
	var left []string
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, id+"-") {
			left = append(left, "Pod "+p.Namespace+"/"+p.Name)
		}
	}
	secrets, err := c.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, id+"-") {
			left = append(left, "Secret "+s.Namespace+"/"+s.Name)
		}
	}
	svcs, err := c.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range svcs.Items {
		if s.Name == id {
			left = append(left, "Service "+s.Namespace+"/"+s.Name)
		}
	}
	sets, err := c.Client.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range sets.Items {
		if strings.HasPrefix(s.Name, id+"-") {
			left = append(left, "StatefulSet "+s.Namespace+"/"+s.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("named after %s: %s", id, strings.Join(left, ", "))
	}
	return nil
}

// sharedDatastore is the machine's PostgreSQL made reachable from the host's pods, and the
// Secret naming it.
type sharedDatastore struct {
	server    *datastore.Server // the admin URL through the node's address
	address   string            // NodeIP:port of the forwarder
	secret    string            // the host Secret (default namespace) with key connection-url
	datastore map[string]any    // spec.backend.datastore naming it
}

// sharedPostgres: the machine's PostgreSQL, reachable from the host's pods (shareDatastore).
func sharedPostgres(t *testing.T, c *hostcluster.RealCluster) sharedDatastore {
	return shareDatastore(t, c, datastore.Postgres)
}
