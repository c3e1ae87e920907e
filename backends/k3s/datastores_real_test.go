package k3s_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/hosted"
	"github.com/kunobi-ninja/kobe/backends/k3s"
	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
	"github.com/kunobi-ninja/kobe/testsuite/goldentest"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
	"github.com/kunobi-ninja/kobe/worker"
)

// shareDatastore makes one of the machine's datastore servers (PostgreSQL, MariaDB, NATS with
// JetStream, all listening on loopback, which the host's pods cannot reach: their only route is
// the node's bridge) reachable from the pods and from kobe alike through a forwarder on the
// node's address, and names it in the host Secret shared-<driver> (key connection-url), as an
// operator would. Whatever the test leaves of its instances on the server fails it.
func shareDatastore(t *testing.T, c *hostcluster.RealCluster, driver datastore.Driver) sharedDatastore {
	var admin, target string
	switch driver {
	case datastore.Postgres:
		admin = dbtest.PostgresAdminURL(t)
		u, err := url.Parse(admin)
		require.NoError(t, err)
		target = u.Host
	case datastore.MySQL:
		admin = dbtest.MySQLAdminURL(t)
		m := regexp.MustCompile(`@tcp\(([^)]+)\)`).FindStringSubmatch(admin)
		require.NotNil(t, m, "kine's MySQL form mysql://user:pass@tcp(host:port)/: %s", datastore.Redact(admin))
		target = m[1]
	case datastore.NATS:
		admin = dbtest.NATSURL(t)
		u, err := url.Parse(admin)
		require.NoError(t, err)
		target = u.Host
	}
	addr := c.ForwardToMachine(t, target)
	through := strings.Replace(admin, target, addr, 1)
	server, err := datastore.Parse(through)
	require.NoError(t, err)
	require.NoError(t, server.Ping(context.Background()), "%s through the forwarder", driver)
	secret := "shared-" + string(driver)
	_, err = c.Client.CoreV1().Secrets("default").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data:       map[string][]byte{datastore.DefaultSecretKey: []byte(through)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Client.CoreV1().Secrets("default").Delete(ctx, secret, metav1.DeleteOptions{})
		for _, prefix := range []string{"ha-", "measure-", "conf-", "gold-"} {
			left, _ := server.Leftovers(ctx, prefix)
			if len(left) > 0 {
				t.Errorf("left on %s: %s", driver, strings.Join(left, ", "))
			}
		}
	})
	return sharedDatastore{server: server, address: addr, secret: secret, datastore: map[string]any{"secretRef": secret}}
}

// deleteAllAtEnd deletes, when the (sub)test ends, every instance it left, while its datastore
// is still reachable (so that their databases are dropped too): call it after shareDatastore.
func deleteAllAtEnd(t *testing.T, b *hosted.Backend) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		ids, _ := b.InstanceIDs(ctx)
		for _, id := range ids {
			if err := b.Delete(ctx, id); err != nil {
				t.Errorf("cleanup of %s: %v", id, err)
			}
		}
	})
}

// adminClient is the instance's admin credential as kobe hands it out.
func adminClient(t *testing.T, b *hosted.Backend, id string) (*rest.Config, *kubernetes.Clientset) {
	t.Helper()
	cred, err := b.Credentials(context.Background(), id, backends.CredentialRequest{})
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(t, err)
	return cfg, kubernetes.NewForConfigOrDie(cfg)
}

// serverClients reach each server pod of the instance directly (its pod address, the
// certificate checked for the Service's name), by pod name.
func serverClients(t *testing.T, c *hostcluster.RealCluster, cfg *rest.Config, id string) map[string]*kubernetes.Clientset {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: hosted.LabelInstance + "=" + id + "," + hosted.LabelComponent + "=server"})
	require.NoError(t, err)
	out := map[string]*kubernetes.Clientset{}
	for _, pod := range pods.Items {
		if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		direct := rest.CopyConfig(cfg)
		direct.Host = "https://" + pod.Status.PodIP + ":6443"
		direct.TLSClientConfig.ServerName = id + ".default.svc"
		direct.Timeout = 10 * time.Second
		out[pod.Name] = kubernetes.NewForConfigOrDie(direct)
	}
	return out
}

// TestSharedDatastoresOnRealHostCluster: real k3s server pods of the real-pods host cluster on
// each shared datastore driver this machine runs: HA (servers: 3) on MariaDB and on NATS, and
// golden templates on PostgreSQL and MariaDB (refused on NATS). HA on PostgreSQL is in
// TestOnRealHostCluster.
func TestSharedDatastoresOnRealHostCluster(t *testing.T) {
	c := hostcluster.StartReal(t, hostcluster.RealOptions{K3s: true})
	b, err := hosted.New(k3s.Distro, hosted.Config{REST: c.Config, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, _ := c.Kubectl("get", "pods,statefulsets,services,secrets,configmaps", "-A", "-o", "wide")
		t.Logf("host objects at the end:\n%s", out)
	})

	for _, driver := range []datastore.Driver{datastore.MySQL, datastore.NATS} {
		t.Run("HA: 3 servers on a shared "+string(driver), func(t *testing.T) {
			ds := shareDatastore(t, c, driver)
			deleteAllAtEnd(t, b)
			haOnSharedDatastore(t, c, b, ds, "ha-"+string(driver))
		})
	}

	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL} {
		t.Run("golden templates on "+string(driver), func(t *testing.T) {
			ds := shareDatastore(t, c, driver)
			deleteAllAtEnd(t, b)
			goldenOnSharedDatastore(t, c, b, ds, "gold-"+string(driver)[:2], driver == datastore.Postgres)
		})
	}

	t.Run("golden templates on NATS are refused at apply, nothing created", func(t *testing.T) {
		ds := shareDatastore(t, c, datastore.NATS)
		s := spec("gold-nats-a", nil, map[string]any{"secretRef": ds.secret, "goldenTemplates": true})
		err := b.Preflight(context.Background(), s)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.backend.datastore.goldenTemplates: the nats datastore cannot copy a database")
		assert.True(t, backends.IsInvalidSpec(err), "a spec refusal: %v", err)
		_, err = b.Create(context.Background(), s)
		require.Error(t, err)
		left, err := b.Leftovers(context.Background(), s.ID)
		require.NoError(t, err)
		assert.Empty(t, left)
		dbs, err := ds.server.Leftovers(context.Background(), "gold-")
		require.NoError(t, err)
		assert.Empty(t, dbs)
	})

	for _, m := range []struct {
		driver datastore.Driver
		ha     bool
	}{{datastore.Postgres, false}, {datastore.MySQL, false}, {datastore.NATS, false}, {datastore.MySQL, true}, {datastore.NATS, true}} {
		name := fmt.Sprintf("create to ready on %s, servers %d (KOBE_K3S_MEASURE=1)", m.driver, map[bool]int{false: 1, true: 3}[m.ha])
		t.Run(name, func(t *testing.T) {
			if os.Getenv("KOBE_K3S_MEASURE") == "" {
				t.Skip("a figure, not a check: set KOBE_K3S_MEASURE=1")
			}
			ds := shareDatastore(t, c, m.driver)
			deleteAllAtEnd(t, b)
			servers := map[bool]int{false: 1, true: 3}[m.ha]
			measure(t, b, func(id string) backends.InstanceSpec {
				return spec(id, map[string]any{"servers": servers}, ds.datastore)
			}, fmt.Sprintf("k3s servers:%d on %s", servers, m.driver), 8*time.Minute)
		})
	}

	t.Run("golden member create to ready, with vs without the template (KOBE_K3S_MEASURE=1)", func(t *testing.T) {
		if os.Getenv("KOBE_K3S_MEASURE") == "" {
			t.Skip("a figure, not a check: set KOBE_K3S_MEASURE=1")
		}
		ds := shareDatastore(t, c, datastore.Postgres)
		deleteAllAtEnd(t, b)
		measureGolden(t, b, ds)
	})
}

// haOnSharedDatastore: 3 servers Ready on the datastore, one cluster (what one server stores
// every server serves); a server pod deleted, the others and the Service keep answering and
// the replacement serves what was written meanwhile; Delete leaves nothing in the host nor on
// the datastore.
func haOnSharedDatastore(t *testing.T, c *hostcluster.RealCluster, b *hosted.Backend, ds sharedDatastore, id string) {
	ctx := context.Background()
	require.NoError(t, b.Preflight(ctx, spec(id, map[string]any{"servers": 3}, ds.datastore)))
	_, err := b.Create(ctx, spec(id, map[string]any{"servers": 3}, ds.datastore))
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	st, err := b.WaitReady(wctx, id, nil)
	require.NoError(t, err)
	t.Logf("%s: 3 servers Ready in %s", id, time.Since(st.CreatedAt).Round(100*time.Millisecond))

	name, err := ds.server.Name(id)
	require.NoError(t, err)
	objs, err := ds.server.Leftovers(ctx, id)
	require.NoError(t, err)
	want := map[datastore.Driver][]string{
		datastore.MySQL: {"database " + name, "user " + name},
		datastore.NATS:  {"bucket " + name},
	}[ds.server.Driver()]
	assert.ElementsMatch(t, want, objs, "the instance's own objects on %s", ds.server.Driver())

	cfg, client := adminClient(t, b, id)
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "written-once"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	servers := serverClients(t, c, cfg, id)
	require.Len(t, servers, 3)
	for pod, sc := range servers {
		got, err := sc.CoreV1().ConfigMaps("default").Get(ctx, "written-once", metav1.GetOptions{})
		require.NoError(t, err, "server %s", pod)
		assert.Equal(t, "v", got.Data["k"], "server %s", pod)
	}

	// A server pod goes (as a node failure or an eviction would take it).
	gone := id + "-server-0"
	zero := int64(0)
	require.NoError(t, c.Client.CoreV1().Pods("default").Delete(ctx, gone, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	for _, pod := range []string{id + "-server-1", id + "-server-2"} {
		_, err := servers[pod].CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "while-" + pod}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		require.NoError(t, err, "server %s writes while %s is gone", pod, gone)
	}
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "while-"+id+"-server-1", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 500*time.Millisecond, "the cluster's address answers while a server is gone")
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err, "the replaced server joins again")
	servers = serverClients(t, c, cfg, id)
	require.Contains(t, servers, gone)
	for _, pod := range []string{id + "-server-1", id + "-server-2"} {
		_, err := servers[gone].CoreV1().ConfigMaps("default").Get(ctx, "while-"+pod, metav1.GetOptions{})
		require.NoError(t, err, "the new %s serves what %s wrote while it was gone", gone, pod)
	}

	require.NoError(t, b.Delete(wctx, id))
	left, err := b.Leftovers(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing of the instance in the host")
	require.NoError(t, namedAfter(ctx, c, id))
	objs, err = ds.server.Leftovers(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, objs, "nothing of the instance on %s", ds.server.Driver())
}

// goldenEnv runs the instance activities (EnsureGoldenTemplate, ApplyAddons) on the k3s backend,
// as a worker runs them in Provision.
type goldenEnv struct {
	b    *hosted.Backend
	env  *testsuite.TestActivityEnvironment
	spec backends.InstanceSpec
	adds []poolspec.Addon
}

func newGoldenEnv(b *hosted.Backend, ds sharedDatastore, pool string, extraConfigMaps int) *goldenEnv {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	acts := worker.NewActivities(nil, zap.NewNop())
	acts.Backends[k3s.Name] = b
	acts.RegisterActivities(env)
	s := spec("", nil, map[string]any{"secretRef": ds.secret, "goldenTemplates": true})
	s.Pool = pool
	return &goldenEnv{b: b, env: env, spec: s, adds: []poolspec.Addon{{Name: "golden", Manifest: goldentest.Manifest(extraConfigMaps)}}}
}

// ensure runs EnsureGoldenTemplate for the pool's current generation and returns it.
func (g *goldenEnv) ensure(t *testing.T) string {
	t.Helper()
	val, err := g.env.ExecuteActivity("EnsureGoldenTemplate", instance.GoldenRequest{Backend: k3s.Name, Spec: g.spec, Addons: g.adds})
	require.NoError(t, err)
	var gen string
	require.NoError(t, val.Get(&gen))
	return gen
}

// member creates a member (from the template of generation, "" for none) and waits until Ready.
func (g *goldenEnv) member(t *testing.T, id, generation string) {
	t.Helper()
	s := g.spec
	s.ID, s.Golden = id, generation
	_, err := g.b.Create(context.Background(), s)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	_, err = g.b.WaitReady(ctx, id, nil)
	require.NoError(t, err)
}

// bootstrapKey is where k3s keeps the bootstrap data of servers started with token (its
// pkg/cluster storageKey: /bootstrap/ and the first 12 hex digits of the token's SHA-256).
func bootstrapKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "/bootstrap/" + hex.EncodeToString(sum[:])[:12]
}

func tokenOf(t *testing.T, c *hostcluster.RealCluster, id string) string {
	t.Helper()
	s, err := c.Client.CoreV1().Secrets("default").Get(context.Background(), id+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	return string(s.Data["token"])
}

// builderNodeAddon stands in for the kubelet of a golden builder's node: this k3s runs no agent
// (no containerd in it), so the builder registers no Node itself. It makes what a registered
// node leaves in the datastore: the Node, its heartbeat Lease in kube-node-lease, k3s's
// node-password Secret, and a pod bound to it.
func builderNodeAddon(node string) poolspec.Addon {
	return poolspec.Addon{Name: "builder-node", Manifest: fmt.Sprintf(`apiVersion: v1
kind: Node
metadata: {name: %[1]s, labels: {kubernetes.io/hostname: %[1]s}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: %[1]s, namespace: kube-node-lease}
spec: {holderIdentity: %[1]s, leaseDurationSeconds: 40}
---
apiVersion: v1
kind: Secret
metadata: {name: %[1]s.node-password.k3s, namespace: kube-system}
data: {hash: bm90LWEtaGFzaA==}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: golden}
spec:
  nodeName: %[1]s
  serviceAccountName: agent
  automountServiceAccountToken: false
  containers: [{name: pause, image: registry.k8s.io/pause:3.10}]
`, node)}
}

// goldenOnSharedDatastore: the template is built once (builder, addons, servers stopped, copy
// without k3s's bootstrap data and serving certificate, nor the builder's node and what is
// bound to it, builder deleted); two members made from it hold the golden objects without any
// addon applied to them, list no node but their own and no pod of the builder's node, each
// bootstrapped its own keys (its own /bootstrap/ key, of its own token), and A's admin
// certificate and A's ServiceAccount token are refused by B; with newGeneration, a spec change
// builds a new template and drops the old one; the last two members deleted at once drop the
// pool's templates and their list: nothing of the pool is left.
func goldenOnSharedDatastore(t *testing.T, c *hostcluster.RealCluster, b *hosted.Backend, ds sharedDatastore, pool string, newGeneration bool) {
	ctx := context.Background()
	g := newGoldenEnv(b, ds, pool, 0)
	builderNode := pool + "-builder-node"
	g.adds = append(g.adds, builderNodeAddon(builderNode))
	t0 := time.Now()
	gen := g.ensure(t)
	t.Logf("template %s built in %s", gen, time.Since(t0).Round(100*time.Millisecond))
	tplID := backends.GoldenTemplateID(backends.InstanceSpec{Pool: pool, Golden: gen})
	tplName, err := ds.server.Name(tplID)
	require.NoError(t, err)
	ids, err := b.InstanceIDs(ctx)
	require.NoError(t, err)
	assert.Empty(t, ids, "the builder is deleted")
	left, err := ds.server.Leftovers(ctx, pool)
	require.NoError(t, err)
	for _, o := range left {
		assert.True(t, strings.HasSuffix(o, " "+tplName), "only the template is on the datastore after the build: %v", left)
	}
	keys, err := ds.server.TemplateKeys(ctx, tplID, "/")
	require.NoError(t, err)
	assert.Contains(t, keys, "/registry/configmaps/golden/probe", "the addon's objects are in the template")
	for _, k := range keys {
		assert.False(t, strings.HasPrefix(k, "/bootstrap/"), "no bootstrap data in the template: %s", k)
		assert.NotEqual(t, "/registry/secrets/kube-system/k3s-serving", k, "no serving certificate in the template")
		for _, prefix := range []string{"/registry/minions/", "/registry/leases/kube-node-lease/", "/registry/pods/", "/registry/endpointslices/"} {
			assert.False(t, strings.HasPrefix(k, prefix), "nothing of the builder's nodes in the template: %s", k)
		}
		assert.NotEqual(t, "/registry/secrets/kube-system/"+builderNode+".node-password.k3s", k, "no node password of the builder's node in the template")
	}

	a, bb := pool+"-a", pool+"-b"
	g.member(t, a, gen)
	g.member(t, bb, gen)
	cfgA, clientA := adminClient(t, b, a)
	cfgB, clientB := adminClient(t, b, bb)
	for id, cl := range map[string]*kubernetes.Clientset{a: clientA, bb: clientB} {
		cm, err := cl.CoreV1().ConfigMaps("golden").Get(ctx, "probe", metav1.GetOptions{})
		require.NoError(t, err, "member %s holds the golden objects", id)
		assert.Equal(t, "template", cm.Data["from"])
		// Each member bootstrapped its own: one bootstrap key, of its own token.
		keys, err := ds.server.TemplateKeys(ctx, id, "/bootstrap/")
		require.NoError(t, err)
		assert.Equal(t, []string{bootstrapKey(tokenOf(t, c, id))}, keys, "member %s's bootstrap data", id)
		// Exactly its own nodes: none, as its servers run without an agent here (the builder's
		// stand-in node would be a NotReady phantom), and no pod bound to the builder's node.
		nodes, err := cl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
		assert.Empty(t, names, "member %s lists no node but its own", id)
		pods, err := cl.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			assert.NotEqual(t, builderNode, p.Spec.NodeName, "member %s: pod %s/%s is bound to the builder's node", id, p.Namespace, p.Name)
		}
		_, err = cl.CoordinationV1().Leases("kube-node-lease").Get(ctx, builderNode, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "member %s: the builder's node Lease: %v", id, err)
		_, err = cl.CoreV1().Secrets("kube-system").Get(ctx, builderNode+".node-password.k3s", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "member %s: the builder's node password: %v", id, err)
	}

	_, err = goldentest.Against(cfgA, cfgB.Host).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "A's admin certificate at B: %v", err)
	_, err = goldentest.Against(cfgA, cfgA.Host).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "A's admin certificate at A")
	tr, err := clientA.CoreV1().ServiceAccounts("golden").CreateToken(ctx, "agent", &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	bearer := &rest.Config{Host: cfgA.Host, BearerToken: tr.Status.Token}
	review, err := clientA.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, review.Status.Authenticated, "the token is good at A")
	_, err = goldentest.Against(bearer, cfgB.Host).CoreV1().ConfigMaps("golden").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "A's ServiceAccount token at B: %v", err)

	if newGeneration {
		g.adds = append(g.adds, poolspec.Addon{Name: "more", Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: more, namespace: golden}\n"})
		gen2 := g.ensure(t)
		require.NotEqual(t, gen, gen2)
		tplName2, err := ds.server.Name(backends.GoldenTemplateID(backends.InstanceSpec{Pool: pool, Golden: gen2}))
		require.NoError(t, err)
		left, err := ds.server.Leftovers(ctx, pool)
		require.NoError(t, err)
		assert.Contains(t, left, "database "+tplName2)
		assert.NotContains(t, left, "database "+tplName, "the old generation's template is dropped")
	}

	// The last two at once, as a drained pool deletes them: the later one drops the templates.
	errs := make(chan error, 2)
	for _, id := range []string{a, bb} {
		go func() {
			dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			errs <- b.Delete(dctx, id)
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	left, err = ds.server.Leftovers(ctx, pool)
	require.NoError(t, err)
	assert.Empty(t, left, "the pool's last members took its templates along")
	_, err = c.Client.CoreV1().ConfigMaps("default").Get(ctx, hosted.GoldenListName(pool), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the pool's list of templates is gone: %v", err)
}

// measureGolden: a member's create → Ready with the pool's addons (a namespace, a
// ServiceAccount and 60 ConfigMaps) applied to it, against the same member made from the golden
// template (no addons to apply), KOBE_K3S_RUNS runs each (default 10).
func measureGolden(t *testing.T, b *hosted.Backend, ds sharedDatastore) {
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("KOBE_K3S_RUNS")); err == nil && n > 0 {
		runs = n
	}
	ctx := context.Background()
	g := newGoldenEnv(b, ds, "gold-measure", 60)
	t0 := time.Now()
	gen := g.ensure(t)
	t.Logf("template built in %s", time.Since(t0).Round(10*time.Millisecond))
	var withAddons, fromTemplate []time.Duration
	for i := 0; i < runs; i++ {
		id := fmt.Sprintf("gold-measure-addons-%d", i)
		t0 := time.Now()
		g.member(t, id, "")
		_, err := g.env.ExecuteActivity("ApplyAddons", instance.AddonsRequest{Backend: k3s.Name, InstanceID: id, Addons: g.adds})
		require.NoError(t, err)
		withAddons = append(withAddons, time.Since(t0))
		require.NoError(t, b.Delete(ctx, id))

		id = fmt.Sprintf("gold-measure-m%d", i)
		t0 = time.Now()
		g.member(t, id, gen)
		fromTemplate = append(fromTemplate, time.Since(t0))
		_, client := adminClient(t, b, id)
		_, err = client.CoreV1().ConfigMaps("golden").Get(ctx, "extra-59", metav1.GetOptions{})
		require.NoError(t, err, "the member made from the template holds the addons' objects")
		t.Logf("run %d: with addons %s, from the template %s", i+1, withAddons[i].Round(10*time.Millisecond), fromTemplate[i].Round(10*time.Millisecond))
		// Kept until the next one exists, so that the template is not dropped in between.
		if i > 0 {
			require.NoError(t, b.Delete(ctx, fmt.Sprintf("gold-measure-m%d", i-1)))
		}
	}
	t.Logf("k3s golden member create→ready on PostgreSQL, %d runs each: with addons applied %s; from the golden template %s",
		runs, spread(withAddons), spread(fromTemplate))
}

// spread is "p50 X (min – max)" of durations.
func spread(d []time.Duration) string {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(x time.Duration) time.Duration { return x.Round(10 * time.Millisecond) }
	return fmt.Sprintf("p50 %s (%s – %s)", r(s[len(s)/2]), r(s[0]), r(s[len(s)-1]))
}
