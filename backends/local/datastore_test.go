package local_test

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// datastoreEnv is a local backend whose worker has one secret per shared datastore server of
// this machine, as an operator would mount them: <secrets>/<name>/connection-url.
type datastoreEnv struct {
	state, secrets string
	b              *local.Backend
}

func newDatastoreEnv(t *testing.T) *datastoreEnv {
	t.Helper()
	e := &datastoreEnv{state: t.TempDir(), secrets: t.TempDir()}
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (make test does it for you)", tools)
	}
	b, err := local.New(local.Config{StateDir: e.state, HostID: "test-host", ToolsDir: tools, SecretsDir: e.secrets})
	require.NoError(t, err)
	e.b = b
	return e
}

// secret writes a secret of the worker: the admin URL under key connection-url.
func (e *datastoreEnv) secret(t *testing.T, name, url string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(e.secrets, name), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(e.secrets, name, datastore.DefaultSecretKey), []byte(url+"\n"), 0o600))
}

func datastoreSpec(id, secretRef string) backends.InstanceSpec {
	return spec(id, fmt.Sprintf(`{"datastore":{"secretRef":%q}}`, secretRef))
}

// adminURL finds a driver's server on this machine (skipped, or failed in CI, without it).
func adminURL(t *testing.T, driver datastore.Driver) string {
	switch driver {
	case datastore.Postgres:
		return dbtest.PostgresAdminURL(t)
	case datastore.MySQL:
		return dbtest.MySQLAdminURL(t)
	default:
		return dbtest.NATSURL(t)
	}
}

func leftovers(t *testing.T, admin, id string) []string {
	t.Helper()
	s, err := datastore.Parse(admin)
	require.NoError(t, err)
	left, err := s.Leftovers(context.Background(), id)
	require.NoError(t, err)
	return left
}

// TestLocalOnEachDatastore: for PostgreSQL, MariaDB and NATS, a real kube-apiserver on kine on
// the instance's own database: created, an object written and read back, the database (or
// bucket) present on the server while the instance lives, the password in no command line,
// and after Delete nothing of it in the server.
func TestLocalOnEachDatastore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver and kine processes; skipped with -short")
	}
	e := newDatastoreEnv(t)
	ctx := context.Background()
	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL, datastore.NATS} {
		t.Run(string(driver), func(t *testing.T) {
			admin := adminURL(t, driver)
			e.secret(t, "shared-"+string(driver), admin)
			id := fmt.Sprintf("ds-%s-%d", driver, time.Now().UnixNano()%1_000_000)
			t.Cleanup(func() { _ = e.b.Delete(context.Background(), id) })

			t0 := time.Now()
			_, err := e.b.Create(ctx, datastoreSpec(id, "shared-"+string(driver)))
			require.NoError(t, err)
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			_, err = e.b.WaitReady(wctx, id, nil)
			require.NoError(t, err, "kine log: %s", readLog(e.state, id, "kine"))
			t.Logf("%s: ready in %s", driver, time.Since(t0).Round(time.Millisecond))

			cred, err := e.b.Credentials(ctx, id, backends.CredentialRequest{})
			require.NoError(t, err)
			c := kubeClient(t, cred.Kubeconfig)
			_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"driver": string(driver)}}, metav1.CreateOptions{})
			require.NoError(t, err)
			got, err := c.CoreV1().ConfigMaps("default").Get(ctx, "probe", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, string(driver), got.Data["driver"])

			left := leftovers(t, admin, id)
			assert.NotEmpty(t, left, "the instance's database is on the server")
			t.Logf("%s: on the server while the instance lives: %v", driver, left)
			dsn, err := os.ReadFile(filepath.Join(e.state, "local", "instances", id, "datastore.dsn"))
			require.NoError(t, err)
			assertNotInAnyCommandLine(t, id, string(dsn))
			if pw := password(string(dsn)); pw != "" {
				for _, c := range []string{"kine", "apiserver"} {
					log, _ := os.ReadFile(filepath.Join(e.state, "local", "instances", id, "logs", c+".log"))
					assert.NotContains(t, string(log), pw, "%s's log holds the instance's password", c)
				}
			}

			// kobe restarts: a new Backend on the same state finds kine (by its environment:
			// its command line does not name the instance) and the API server, and its Delete
			// stops them and drops the database.
			dir := filepath.Join(e.state, "local", "instances", id)
			require.Len(t, processesOf(t, dir), 2, "kine and kube-apiserver carry the instance dir in their environment")
			b2, err := local.New(local.Config{StateDir: e.state, HostID: "test-host", ToolsDir: local.DefaultToolsDir(), SecretsDir: e.secrets})
			require.NoError(t, err)
			st, err := b2.Status(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, backends.PhaseReady, st.Phase, "adopted with every process: %s", st.Message)

			require.NoError(t, b2.Delete(ctx, id))
			assert.Empty(t, processesOf(t, dir), "no process of the instance is left")
			assert.Empty(t, leftovers(t, admin, id), "nothing of the instance is left in the server")
			require.NoError(t, e.b.Delete(ctx, id), "twice is fine")
		})
	}
}

// assertNotInAnyCommandLine: the instance's DSN (its password) appears in no process's
// command line, which every local user can read.
func assertNotInAnyCommandLine(t *testing.T, id, dsn string) {
	t.Helper()
	secret := dsn
	if i := strings.LastIndex(dsn, "@"); i > 0 {
		secret = dsn[:i] // user:password part
	}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, en := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		assert.NotContains(t, string(data), secret, "pid %s's command line holds the DSN of %s", en.Name(), id)
	}
}

// password is the password of a user:password@ URL, or "".
func password(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "://")
	userinfo, _, ok := strings.Cut(rest, "@")
	if !ok {
		return ""
	}
	_, pw, _ := strings.Cut(userinfo, ":")
	return pw
}

// processesOf lists the pids whose environment names the instance directory.
func processesOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, en := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", en.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(data), "\x00") {
			if kv == "KOBE_LOCAL_INSTANCE_DIR="+dir {
				out = append(out, en.Name())
			}
		}
	}
	return out
}

func readLog(state, id, component string) string {
	data, _ := os.ReadFile(filepath.Join(state, "local", "instances", id, "logs", component+".log"))
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

// TestConformanceOnEachDatastore runs the whole conformance suite for the local backend on a
// shared PostgreSQL, MariaDB and NATS (sleep/resume and certificate rotation restart kine on the
// instance's database; delete checks that nothing is left in the server). ~15 s a driver here.
func TestConformanceOnEachDatastore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	e := newDatastoreEnv(t)
	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL, datastore.NATS} {
		t.Run(string(driver), func(t *testing.T) {
			admin := adminURL(t, driver)
			ref := "conf-" + string(driver)
			e.secret(t, ref, admin)
			invalid := []backends.InstanceSpec{
				datastoreSpec("conf-nosecret", "no-such-secret"),
				spec("conf-nosecretref", `{"datastore":{}}`),
			}
			if driver == datastore.NATS {
				// Golden templates need a database copy, which NATS has not.
				invalid = append(invalid, spec("conf-golden", fmt.Sprintf(`{"datastore":{"secretRef":%q,"goldenTemplates":true}}`, ref)))
			}
			conformance.Run(t, conformance.Subject{
				Backend:      e.b,
				Spec:         func(id string) backends.InstanceSpec { return datastoreSpec(id, ref) },
				InvalidSpecs: invalid,
				ReadyWithin:  90 * time.Second,
				Leftovers: func(id string) error {
					dir := filepath.Join(e.state, "local", "instances", id)
					if _, err := os.Stat(dir); !os.IsNotExist(err) {
						return fmt.Errorf("%s remains", dir)
					}
					if left := leftovers(t, admin, id); len(left) > 0 {
						return fmt.Errorf("left in %s: %v", driver, left)
					}
					return nil
				},
			})
		})
	}
}

// TestDatastoreBadInput: a missing secret or key, a bad scheme and an unreachable server are
// refused with an error naming the field (the first three as the spec's fault), and leave no
// instance, directory or database.
func TestDatastoreBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("talks to the local datastore servers; skipped with -short")
	}
	e := newDatastoreEnv(t)
	ctx := context.Background()
	e.secret(t, "redis", "redis://127.0.0.1:6379")
	e.secret(t, "down", "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	require.NoError(t, os.MkdirAll(filepath.Join(e.secrets, "nokey"), 0o700))
	cases := []struct {
		name, opts, want string
		invalid          bool
	}{
		{"missing secret", `{"datastore":{"secretRef":"absent"}}`, `spec.backend.local.datastore.secretRef: secret "absent" not found on this worker`, true},
		{"missing key", `{"datastore":{"secretRef":"nokey"}}`, `spec.backend.local.datastore.secretKey: secret "nokey" has no key "connection-url"`, true},
		{"other key missing", `{"datastore":{"secretRef":"redis","secretKey":"url"}}`, `has no key "url"`, true},
		{"bad scheme", `{"datastore":{"secretRef":"redis"}}`, `unsupported datastore scheme "redis"`, true},
		{"unreachable", `{"datastore":{"secretRef":"down"}}`, "cannot reach the postgres datastore postgres://postgres:xxxxx@127.0.0.1:1", false},
		{"path in secretRef", `{"datastore":{"secretRef":"../etc"}}`, `spec.backend.local.datastore.secretRef: "../etc" is not a Secret name`, false},
		{"path in secretKey", `{"datastore":{"secretRef":"redis","secretKey":"../../x"}}`, `spec.backend.local.datastore.secretKey: "../../x" is not a Secret key`, false},
		{"unknown field", `{"datastore":{"secretRef":"redis","database":"x"}}`, `unknown field "database"`, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-%d", i)
			_, err := e.b.Create(ctx, spec(id, tc.opts))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "hunter2")
			if tc.invalid {
				assert.True(t, backends.IsInvalidSpec(err), "the spec's fault: %v", err)
			}
			perr := e.b.Preflight(ctx, spec(id, tc.opts))
			require.Error(t, perr, "preflight refuses it too")
			assert.Contains(t, perr.Error(), tc.want)
			assert.Equal(t, tc.name != "unreachable", backends.IsInvalidSpec(perr), "only an unreachable server is not the spec's fault: %v", perr)
			_, err = e.b.Status(ctx, id)
			assert.ErrorIs(t, err, backends.ErrNotFound)
			_, err = os.Stat(filepath.Join(e.state, "local", "instances", id))
			assert.True(t, os.IsNotExist(err), "no instance directory is left")
		})
	}
	if s, err := datastore.Parse(dbtest.PostgresAdminURL(t)); err == nil {
		left, err := s.Leftovers(ctx, "bad-")
		require.NoError(t, err)
		assert.Empty(t, left)
	}
	assert.Empty(t, e.b.InstanceIDs())
}

// TestMeasureCreateReadyPerDatastore measures create → ready of a local instance (apiserver
// only) on SQLite and on each shared datastore, KOBE_DATASTORE_RUNS runs each (default 10).
// It runs only when asked: KOBE_DATASTORE_MEASURE=1.
func TestMeasureCreateReadyPerDatastore(t *testing.T) {
	if os.Getenv("KOBE_DATASTORE_MEASURE") != "1" {
		t.Skip("a measurement, not a check: set KOBE_DATASTORE_MEASURE=1 to run it")
	}
	runs := 10
	if n, err := fmt.Sscan(os.Getenv("KOBE_DATASTORE_RUNS"), &runs); n != 1 || err != nil {
		runs = 10
	}
	e := newDatastoreEnv(t)
	ctx := context.Background()
	for _, driver := range []string{"sqlite", string(datastore.Postgres), string(datastore.MySQL), string(datastore.NATS)} {
		t.Run(driver, func(t *testing.T) {
			sp := func(id string) backends.InstanceSpec { return spec(id, "") }
			if driver != "sqlite" {
				e.secret(t, "m-"+driver, adminURL(t, datastore.Driver(driver)))
				sp = func(id string) backends.InstanceSpec { return datastoreSpec(id, "m-"+driver) }
			}
			var ready, del []time.Duration
			for i := 0; i < runs; i++ {
				id := fmt.Sprintf("m-%s-%d", driver, i)
				t0 := time.Now()
				_, err := e.b.Create(ctx, sp(id))
				require.NoError(t, err)
				wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				_, err = e.b.WaitReady(wctx, id, nil)
				cancel()
				require.NoError(t, err)
				ready = append(ready, time.Since(t0))
				t1 := time.Now()
				require.NoError(t, e.b.Delete(ctx, id))
				del = append(del, time.Since(t1))
			}
			t.Logf("%-8s create→ready p50 %s (min %s, max %s); delete p50 %s; %d runs: %v",
				driver, p50(ready), minOf(ready), maxOf(ready), p50(del), runs, rounded(ready))
		})
	}
}

func p50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

func minOf(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = min(m, x)
	}
	return m.Round(time.Millisecond)
}

func maxOf(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = max(m, x)
	}
	return m.Round(time.Millisecond)
}

func rounded(d []time.Duration) []string {
	var out []string
	for _, x := range d {
		out = append(out, fmt.Sprintf("%.2fs", x.Seconds()))
	}
	return out
}
