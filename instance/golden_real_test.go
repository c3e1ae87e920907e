package instance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
	"github.com/kunobi-ninja/kobe/testsuite/goldentest"
	"github.com/kunobi-ninja/kobe/worker"
)

// goldenEnv is a local backend on this machine's PostgreSQL or MariaDB with golden templates,
// and the instance activities around it, run as Provision runs them.
type goldenEnv struct {
	b     *local.Backend
	env   *testsuite.TestActivityEnvironment
	state string
	admin *datastore.Server
	pool  string
	in    instance.ProvisionInput
}

func newGoldenEnv(t testing.TB, driver datastore.Driver, extra int) *goldenEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real control-plane processes on a real datastore; skipped with -short")
	}
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	url := dbtest.PostgresAdminURL(t)
	if driver == datastore.MySQL {
		url = dbtest.MySQLAdminURL(t)
	}
	admin, err := datastore.Parse(url)
	require.NoError(t, err)
	secrets := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(secrets, "ds"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "ds", datastore.DefaultSecretKey), []byte(url), 0o600))
	state := t.TempDir()
	b, err := local.New(local.Config{StateDir: state, HostID: "test-host", ToolsDir: tools, SecretsDir: secrets})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	acts := worker.NewActivities(nil, zap.NewNop())
	acts.Backends["local"] = b
	acts.RegisterActivities(env)
	pool := fmt.Sprintf("gold%d", time.Now().UnixNano()%1_000_000)
	g := &goldenEnv{b: b, env: env, state: state, admin: admin, pool: pool, in: instance.ProvisionInput{
		Backend: "local",
		Spec: backends.InstanceSpec{Pool: pool, KubernetesVersion: local.Tools{Dir: tools}.KubernetesVersions()[0],
			Options: []byte(`{"datastore":{"secretRef":"ds","goldenTemplates":true}}`)},
		Addons: []poolspec.Addon{{Name: "golden", Manifest: goldentest.Manifest(extra)}},
	}}
	t.Cleanup(func() {
		for _, id := range b.InstanceIDs() {
			_ = b.Delete(context.Background(), id)
		}
		left, _ := admin.Leftovers(context.Background(), pool)
		for _, o := range left {
			t.Logf("left behind: %s", o)
		}
	})
	return g
}

// ensure runs EnsureGoldenTemplate for the pool's current generation.
func (g *goldenEnv) ensure(t testing.TB) string {
	t.Helper()
	val, err := g.env.ExecuteActivity("EnsureGoldenTemplate", instance.GoldenRequest{Backend: "local", Spec: g.in.Spec, Addons: g.in.Addons})
	require.NoError(t, err)
	var gen string
	require.NoError(t, val.Get(&gen))
	require.Equal(t, instance.GoldenGeneration(g.in.Spec, g.in.Addons), gen)
	return gen
}

// member creates a member (from the template when generation is set) and waits until Ready.
func (g *goldenEnv) member(t testing.TB, id, generation string) {
	t.Helper()
	sp := g.in.Spec
	sp.ID, sp.Golden = id, generation
	_, err := g.b.Create(context.Background(), sp)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err = g.b.WaitReady(ctx, id, nil)
	require.NoError(t, err)
}

func (g *goldenEnv) adminConfig(t testing.TB, id string) *rest.Config {
	t.Helper()
	cred, err := g.b.Credentials(context.Background(), id, backends.CredentialRequest{})
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(t, err)
	return cfg
}

// TestGoldenTemplateOnRealDatastores: on PostgreSQL and MariaDB, the pool's template is built
// once from a builder with the addons (the builder is gone after), two members made from it
// both hold the golden objects without any addon applied to them, A's admin certificate and
// ServiceAccount token are refused by B, a new spec makes a new template and drops the old one,
// the template stays while a member lives, and deleting
// the last two members at once (a drained pool) drops it: nothing of the pool is left.
func TestGoldenTemplateOnRealDatastores(t *testing.T) {
	ctx := context.Background()
	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL} {
		t.Run(string(driver), func(t *testing.T) {
			g := newGoldenEnv(t, driver, 0)
			gen := g.ensure(t)
			tplName, err := g.admin.Name(backends.GoldenTemplateID(backends.InstanceSpec{Pool: g.pool, Golden: gen}))
			require.NoError(t, err)
			left, err := g.admin.Leftovers(ctx, g.pool)
			require.NoError(t, err)
			for _, o := range left {
				assert.True(t, strings.HasSuffix(o, " "+tplName), "only the template is on the server after the build, not the builder: %v", left)
			}
			assert.Empty(t, g.b.InstanceIDs(), "the builder is deleted")
			assert.Equal(t, gen, g.ensure(t), "a second ensure finds the template")

			a, b := g.pool+"-a", g.pool+"-b"
			g.member(t, a, gen)
			g.member(t, b, gen)
			cfgA, cfgB := g.adminConfig(t, a), g.adminConfig(t, b)
			for id, cfg := range map[string]*rest.Config{a: cfgA, b: cfgB} {
				cm, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("golden").Get(ctx, "probe", metav1.GetOptions{})
				require.NoError(t, err, "member %s holds the golden objects", id)
				assert.Equal(t, "template", cm.Data["from"])
			}

			// A's admin certificate (signed by A's CA) at B's API server: refused.
			_, err = goldentest.Against(cfgA, cfgB.Host).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			assert.True(t, apierrors.IsUnauthorized(err), "A's admin certificate at B: %v", err)
			// A token of the golden ServiceAccount minted by A (signed by A's key) at B: refused.
			tr, err := kubernetes.NewForConfigOrDie(cfgA).CoreV1().ServiceAccounts("golden").CreateToken(ctx, "agent",
				&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{}}, metav1.CreateOptions{})
			require.NoError(t, err)
			bearer := &rest.Config{Host: cfgA.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
			review, err := kubernetes.NewForConfigOrDie(cfgA).AuthenticationV1().TokenReviews().Create(ctx,
				&authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
			require.NoError(t, err)
			assert.True(t, review.Status.Authenticated, "the token is good at A")
			_, err = goldentest.Against(bearer, cfgB.Host).CoreV1().ConfigMaps("golden").List(ctx, metav1.ListOptions{})
			assert.True(t, apierrors.IsUnauthorized(err), "A's ServiceAccount token at B: %v", err)

			// A new spec (one more addon) is a new generation: its template replaces the old one.
			g.in.Addons = append(g.in.Addons, poolspec.Addon{Name: "more", Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: more, namespace: golden}\n"})
			gen2 := g.ensure(t)
			require.NotEqual(t, gen, gen2)
			tplName2, err := g.admin.Name(backends.GoldenTemplateID(backends.InstanceSpec{Pool: g.pool, Golden: gen2}))
			require.NoError(t, err)
			left, err = g.admin.Leftovers(ctx, g.pool)
			require.NoError(t, err)
			assert.Contains(t, left, "database "+tplName2)
			assert.NotContains(t, left, "database "+tplName, "the old generation's template is dropped")
			c := g.pool + "-c"
			g.member(t, c, gen2)
			_, err = kubernetes.NewForConfigOrDie(g.adminConfig(t, c)).CoreV1().ConfigMaps("golden").Get(ctx, "more", metav1.GetOptions{})
			require.NoError(t, err, "the member of the new generation has the new addon's object")

			require.NoError(t, g.b.Delete(ctx, a))
			left, err = g.admin.Leftovers(ctx, g.pool)
			require.NoError(t, err)
			assert.Contains(t, left, "database "+tplName2, "the template stays while members made from one live")
			// The last two at once, as a drained pool deletes them: the later one drops it.
			errs := make(chan error, 2)
			for _, id := range []string{b, c} {
				go func() { errs <- g.b.Delete(ctx, id) }()
			}
			require.NoError(t, <-errs)
			require.NoError(t, <-errs)
			left, err = g.admin.Leftovers(ctx, g.pool)
			require.NoError(t, err)
			assert.Empty(t, left, "the pool's last member took its template along")
			_, err = os.Stat(filepath.Join(g.state, "local", "golden", g.pool+".json"))
			assert.True(t, os.IsNotExist(err), "the pool's list of templates is gone: %v", err)
		})
	}
}

// TestMeasureGoldenMember measures a member's create → Ready with the pool's addons (a
// namespace, a ServiceAccount and 60 ConfigMaps) applied to it, against the same member made
// from the golden template (no addons to apply), KOBE_GOLDEN_RUNS runs each (default 10), on
// PostgreSQL. It runs only when asked: KOBE_GOLDEN_MEASURE=1.
func TestMeasureGoldenMember(t *testing.T) {
	if os.Getenv("KOBE_GOLDEN_MEASURE") != "1" {
		t.Skip("a measurement, not a check: set KOBE_GOLDEN_MEASURE=1 to run it")
	}
	runs := 10
	if n, err := fmt.Sscan(os.Getenv("KOBE_GOLDEN_RUNS"), &runs); n != 1 || err != nil {
		runs = 10
	}
	g := newGoldenEnv(t, datastore.Postgres, 60)
	ctx := context.Background()
	t0 := time.Now()
	gen := g.ensure(t)
	t.Logf("template built in %s", time.Since(t0).Round(time.Millisecond))
	var withAddons, fromTemplate []time.Duration
	for i := 0; i < runs; i++ {
		id := fmt.Sprintf("%s-addons-%d", g.pool, i)
		t0 := time.Now()
		g.member(t, id, "")
		_, err := g.env.ExecuteActivity("ApplyAddons", instance.AddonsRequest{Backend: "local", InstanceID: id, Addons: g.in.Addons})
		require.NoError(t, err)
		withAddons = append(withAddons, time.Since(t0))
		require.NoError(t, g.b.Delete(ctx, id))

		id = fmt.Sprintf("%s-golden-m%d", g.pool, i)
		t0 = time.Now()
		g.member(t, id, gen)
		fromTemplate = append(fromTemplate, time.Since(t0))
		_, err = kubernetes.NewForConfigOrDie(g.adminConfig(t, id)).CoreV1().ConfigMaps("golden").Get(ctx, "extra-59", metav1.GetOptions{})
		require.NoError(t, err, "the member made from the template holds the addons' objects")
		// Kept until the next one exists, so that the template is not dropped in between.
		if i > 0 {
			require.NoError(t, g.b.Delete(ctx, fmt.Sprintf("%s-golden-m%d", g.pool, i-1)))
		}
	}
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2].Round(time.Millisecond)
	}
	t.Logf("member create→ready, %d runs each: with addons applied p50 %s %v; from the golden template p50 %s %v",
		runs, med(withAddons), withAddons, med(fromTemplate), fromTemplate)
}
