// Package soak runs kobe under load while a fault injector kills its processes, breaks its
// clusters and sends it bad requests, then checks that nothing was lost, leaked, granted twice or
// exposed. `make test` runs a short variant (about a minute of load); `make soak` a long one:
//
//	go test -count=1 -timeout 60m -run TestSoak -v ./testsuite/soak/ -args -soak.duration=10m
//
// kobe runs as three real processes on one state directory and one PostgreSQL store:
// `kobe dev --no-worker` (the embedded Temporal server), `kobe server` (the API the clients
// use) and `kobe worker` (workflows, activities and the local backend's clusters).
package soak

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/pool"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	localbackend "github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/logging"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

var (
	flagDuration      = flag.Duration("soak.duration", 50*time.Second, "how long clients keep starting lease lifecycles")
	flagLifecycles    = flag.Int("soak.lifecycles", 400, "stop starting lease lifecycles after this many")
	flagClients       = flag.Int("soak.clients", 4, "concurrent clients")
	flagPrincipals    = flag.Int("soak.principals", 2, "principals (tokens of role ci) the clients share")
	flagWarm          = flag.Int("soak.warm", 3, "the pool's warm target (minReady)")
	flagMaxClusters   = flag.Int("soak.max-clusters", 5, "the pool's maxClusters")
	flagFaultEvery    = flag.Duration("soak.fault-every", 5*time.Second, "mean pause between faults (after the previous one recovered)")
	flagInvalid       = flag.Float64("soak.invalid-rate", 3, "invalid requests per second, from their own client")
	flagSeed          = flag.Int64("soak.seed", 0, "random seed (0: from the clock; the summary prints it)")
	flagContinueAsNew = flag.Int("soak.continue-as-new-after", 300, "history length past which pools and leases continue as new (KOBE_CONTINUE_AS_NEW_AFTER)")
	flagReport        = flag.String("soak.report", "", "also write the summary as JSON to this file")
	flagSignIn        = flag.Float64("soak.signin-rate", 8, "hostile sign-in callbacks per second, from their own client (many source addresses)")
	flagFaults        = flag.String("soak.faults", "", "only these faults, comma-separated by name (e.g. \"thaw broken\"); empty: every one")
)

var kobeBin string

func TestMain(m *testing.M) {
	testsuite.MainWithKobeBinary(m, "soak", "runs the real binary under faults", &kobeBin)
}

const (
	soakPool      = "soak"
	forbiddenPool = "soak-forbidden" // exists, but role ci may not lease from it
	// schedPool has a sleep and a wake schedule (every other minute each); a fault deletes and
	// applies it again, alternating two shapes of its schedules.
	schedPool    = "soak-sched"
	perPrincipal = 2 // maxConcurrentLeases of role ci
	// orphanGrace is the worker's --orphan-grace (its minimum); the reaper runs every minute.
	orphanGrace    = time.Minute
	reaperInterval = time.Minute
	// queueTimeout is the soak pool's spec.scaling.queueTimeout.
	queueTimeout = 90 * time.Second
)

// env is the running kobe under test and what the harness needs to check it.
type env struct {
	t       *testing.T
	cfg     config
	state   string
	logDir  string
	dsn     string
	dbPass  string
	version string

	dev, server, worker *kobeProc
	apiURL              string
	temporal            client.Client
	db                  *sql.DB

	adminToken string
	principals []principal
	// oidc is the OpenID provider the policy's oidc.login names (the hostile sign-ins' target).
	oidc *oidcprovider.Provider

	// thawFaults counts the thaw faults injected (they take their variants in turn).
	thawFaults int
}

type principal struct {
	name  string
	token string
}

type config struct {
	Duration    time.Duration `json:"duration"`
	Lifecycles  int           `json:"lifecycles"`
	Clients     int           `json:"clients"`
	Principals  int           `json:"principals"`
	Warm        int           `json:"warm"`
	MaxClusters int           `json:"maxClusters"`
	FaultEvery  time.Duration `json:"faultEvery"`
	Invalid     float64       `json:"invalidPerSecond"`
	Seed        int64         `json:"seed"`
	Quota       int           `json:"roleQuota"`
	SignIn      float64       `json:"signInPerSecond"`
	// Faults, when set, are the only faults injected (a run aimed at some paths).
	Faults []string `json:"faults,omitempty"`
}

func configFromFlags(t *testing.T) config {
	c := config{Duration: *flagDuration, Lifecycles: *flagLifecycles, Clients: *flagClients, Principals: *flagPrincipals,
		Warm: *flagWarm, MaxClusters: *flagMaxClusters, FaultEvery: *flagFaultEvery, Invalid: *flagInvalid, Seed: *flagSeed, SignIn: *flagSignIn}
	if *flagFaults != "" {
		for _, k := range strings.Split(*flagFaults, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(allFaults, k) {
				t.Fatalf("-soak.faults: unknown fault %q (the faults: %s)", k, strings.Join(allFaults, ", "))
			}
			c.Faults = append(c.Faults, k)
		}
	}
	switch {
	case c.Duration <= 0 || c.Lifecycles <= 0:
		t.Fatalf("-soak.duration and -soak.lifecycles must be positive")
	case c.Clients < 1 || c.Principals < 1 || c.Principals > c.Clients:
		t.Fatalf("-soak.clients must be ≥ 1 and -soak.principals between 1 and the clients")
	case c.Warm < 1 || c.MaxClusters < c.Warm:
		t.Fatalf("-soak.warm must be ≥ 1 and ≤ -soak.max-clusters")
	case c.Invalid < 0 || c.SignIn < 0:
		t.Fatalf("-soak.invalid-rate and -soak.signin-rate must be ≥ 0")
	case c.FaultEvery <= 0:
		t.Fatalf("-soak.fault-every must be positive")
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	// One less than the principals could hold together, so the role's aggregate quota binds too.
	c.Quota = max(1, c.Principals*perPrincipal-1)
	return c
}

func TestSoak(t *testing.T) {
	cfg := configFromFlags(t)
	e := newEnv(t, cfg)
	r := e.run()
	fmt.Println(r.String())
	if *flagReport != "" {
		data, err := json.MarshalIndent(r, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(*flagReport, data, 0o644))
	}
	for _, v := range r.Violations {
		t.Errorf("invariant broken: %s", v)
	}
}

func newEnv(t *testing.T, cfg config) *env {
	tools := localbackend.Tools{Dir: localbackend.DefaultToolsDir()}
	versions := tools.KubernetesVersions()
	if len(versions) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` or set KOBE_TOOLS_DIR", tools.Dir)
	}
	e := &env{t: t, cfg: cfg, state: filepath.Join(t.TempDir(), "state"), logDir: t.TempDir(), version: versions[len(versions)-1]}
	if os.Getenv("KOBE_SOAK_KEEP") != "" {
		// Keep the logs and the state dir of a run to look at afterwards.
		keep, err := os.MkdirTemp("", "kobe-soak-")
		require.NoError(t, err)
		e.state, e.logDir = filepath.Join(keep, "state"), filepath.Join(keep, "logs")
		require.NoError(t, os.MkdirAll(e.logDir, 0o755))
		t.Logf("KOBE_SOAK_KEEP: logs and state in %s", keep)
	}
	// Instances outlive a killed worker: whatever a failed run leaves that names this state dir
	// is killed at the end (registered first, so it runs last).
	t.Cleanup(func() {
		if ps := leaks.KillNaming(e.state + "/"); len(ps) > 0 {
			t.Logf("cleanup killed leftover processes: %v", ps)
		}
	})
	e.dsn, e.dbPass = storeWithPassword(t)
	// A real OpenID provider, so that the portal's sign-in is configured and its callback
	// reaches the refusals the hostile sign-ins aim at (abuse.go).
	e.oidc = oidcprovider.Start(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(fmt.Sprintf(`roles:
  admin:
    permissions: [lease, pool.read, pool.admin, audit.read, tokens]
  ci:
    permissions: [lease, pool.read]
    pools: [%q]
    maxTtl: 10m
    maxExtensions: 2
    maxConcurrentLeases: %d
    quota: %d
    rateLimit: {requestsPerSecond: 200, burst: 400}
  dev:
    permissions: [lease, pool.read]
oidc:
  issuers:
  - issuer: %s
    audiences: [kobe-portal]
    rules: [{match: {email: "*@example.com"}, role: dev}]
  login:
    issuer: %s
    clientId: kobe-portal
    redirectUrl: http://kobe.test/ui/callback
`, soakPool, perPrincipal, cfg.Quota, e.oidc.Issuer, e.oidc.Issuer)), 0o600))

	free := func() int {
		p, err := devserver.FreePort("127.0.0.1")
		require.NoError(t, err)
		return p
	}
	devAPI, temporalPort, serverAPI, metrics := free(), free(), free(), free()
	// The store DSN holds a password: it goes through the environment, as a user would pass it,
	// and the secrets scan looks for the password everywhere.
	// A low continue-as-new threshold, so the pool and the leases cross many runs under faults.
	storeEnv := []string{"KOBE_STORE=" + e.dsn, "KOBE_CONTINUE_AS_NEW_AFTER=" + fmt.Sprint(*flagContinueAsNew)}
	secretKey := filepath.Join(e.state, "secret.key")
	adminTokenFile := filepath.Join(e.state, "admin-token")
	temporalAddr := fmt.Sprintf("127.0.0.1:%d", temporalPort)
	e.dev = &kobeProc{name: "dev", logDir: e.logDir, env: storeEnv,
		healthz: fmt.Sprintf("http://127.0.0.1:%d/readyz", devAPI),
		args: []string{"dev", "--no-worker", "--no-default-pool", "--state-dir", e.state, "--policy", policy,
			"--api-address", fmt.Sprintf("127.0.0.1:%d", devAPI), "--temporal-port", fmt.Sprint(temporalPort), "--ui-port", "0"}}
	e.server = &kobeProc{name: "server", logDir: e.logDir, env: storeEnv,
		healthz: fmt.Sprintf("http://127.0.0.1:%d/readyz", serverAPI),
		args: []string{"server", "--temporal-address", temporalAddr, "--api-address", fmt.Sprintf("127.0.0.1:%d", serverAPI),
			"--secret-key-file", secretKey, "--admin-token-file", adminTokenFile, "--policy", policy}}
	e.worker = &kobeProc{name: "worker", logDir: e.logDir, env: storeEnv,
		healthz: fmt.Sprintf("http://127.0.0.1:%d/healthz", metrics),
		args: []string{"worker", "--temporal-address", temporalAddr, "--state-dir", e.state,
			"--secret-key-file", secretKey, "--metrics-address", fmt.Sprintf("127.0.0.1:%d", metrics),
			"--orphan-grace", orphanGrace.String()}}
	e.apiURL = fmt.Sprintf("http://127.0.0.1:%d", serverAPI)
	t.Cleanup(func() {
		// Reverse order of start; SIGTERM so a clean stop is tried before the kill.
		for _, p := range []*kobeProc{e.worker, e.server, e.dev} {
			p.stop(20 * time.Second)
		}
		if t.Failed() {
			for _, p := range []*kobeProc{e.dev, e.server, e.worker} {
				t.Logf("--- kobe %s (last run) stderr tail:\n%s", p.name, p.tail())
			}
		}
	})
	for _, p := range []*kobeProc{e.dev, e.server, e.worker} {
		require.NoError(t, p.start())
		require.NoError(t, p.waitServing(2*time.Minute))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: temporalAddr, Namespace: "default",
		Logger: logging.NewSDKLogger(zap.NewExample(zap.IncreaseLevel(zap.ErrorLevel)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	e.temporal = c
	db, err := sql.Open("pgx", e.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	e.db = db

	token, err := os.ReadFile(adminTokenFile)
	require.NoError(t, err)
	e.adminToken = string(trimSpace(token))
	admin := e.client(e.adminToken)
	for i := 0; i < cfg.Principals; i++ {
		// A random part makes the name a canary the secrets scan must find in lease histories.
		var b [6]byte
		_, _ = rand.Read(b[:])
		name := fmt.Sprintf("soak-ci-%d-%x", i+1, b)
		tok, err := admin.CreateToken(ctx, api.TokenRequest{Name: name, Role: "ci"})
		require.NoError(t, err)
		e.principals = append(e.principals, principal{name: name, token: tok.Secret})
	}
	e.applyPool(t, soakPool, cfg.Warm, cfg.MaxClusters)
	e.applyPool(t, forbiddenPool, 0, 1)
	require.NoError(t, e.applySchedPool(0), "apply pool %s", schedPool)
	return e
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// client is the typed API client for a token, with retries of transient answers turned off:
// the harness decides itself what to retry and counts every answer.
func (e *env) client(token string) *api.Client {
	c, err := api.NewClient(e.apiURL)
	require.NoError(e.t, err)
	c.Token = token
	c.Retry = api.RetryPolicy{MaxAttempts: 1}
	return c
}

// applyPool declares a pool of light local clusters (kube-apiserver and kine only): the soak is
// about kobe's bookkeeping under faults, and lighter members let more lifecycles run.
func (e *env) applyPool(t *testing.T, name string, warm, maxClusters int) {
	require.NoError(t, e.applyPoolErr(name, warm, maxClusters), "apply pool %s", name)
}

func (e *env) applyPoolErr(name string, warm, maxClusters int) error {
	return e.applyManifest(e.poolManifest(name, warm, maxClusters))
}

// applySchedPool applies the schedule pool in one of its two shapes: shape 0 sleeps its Bound
// leases at even minutes, wakes them at odd ones and has a warm window; shape 1 swaps the
// minutes and has no window. A pool re-created in the other shape must end with exactly its
// own schedules (ids and crons), none of the old one's.
func (e *env) applySchedPool(shape int) error {
	m := e.poolManifest(schedPool, 1, 2)
	spec := m["spec"].(map[string]any)
	sleep, wake := schedCrons(shape)
	spec["sleep"] = map[string]any{"schedule": sleep, "wakeSchedule": wake}
	// Every spare of it is frozen: each bind of its client thaws its member (the thaw fault's
	// surest target; under load the soak pool rarely has a spare to freeze).
	spec["scaling"].(map[string]any)["thawedSpares"] = 0
	if shape == 0 {
		// A window that does not change the warm target (minReady 1 either way): it is there to
		// have a schedule the other shape lacks.
		spec["scaling"].(map[string]any)["schedule"] = []any{map[string]any{"cron": "0 3 * * *", "duration": "1h", "minReady": 1}}
	}
	return e.applyManifest(m)
}

// schedCrons are the sleep and wake crons of the schedule pool's shape.
func schedCrons(shape int) (sleep, wake string) {
	if shape == 0 {
		return "*/2 * * * *", "1-59/2 * * * *"
	}
	return "1-59/2 * * * *", "*/2 * * * *"
}

// schedIDs are the Temporal schedule ids the schedule pool's shape must have.
func schedIDs(shape int) []string {
	p := pool.ScheduleIDPrefix(schedPool)
	ids := []string{p + "sleep", p + "wake"}
	if shape == 0 {
		ids = append(ids, p+"warm-0")
	}
	return ids
}

func (e *env) poolManifest(name string, warm, maxClusters int) map[string]any {
	return map[string]any{
		"apiVersion": "kobe.kunobi.ninja/v1alpha1", "kind": "ClusterPool",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"backend":                 map[string]any{"type": "local", "local": map[string]any{"components": []string{"apiserver"}}},
			"cluster":                 map[string]any{"version": e.version},
			"ttl":                     "2m",
			"maxTtl":                  "10m",
			"maxExtensions":           2,
			"maxConcurrentProvisions": 2,
			"healthCheck":             map[string]any{"intervalSeconds": int(healthInterval / time.Second), "failureThreshold": healthThreshold},
			// thawedSpares 1: the spares beyond one are frozen, so warm binds thaw members (and
			// the thaw fault has thaws to break).
			"scaling": map[string]any{"minReady": warm, "maxClusters": maxClusters, "queueTimeout": queueTimeout.String(),
				"scaleDownAfter": "30s", "creatingTimeout": "3m", "thawedSpares": 1,
				"failureBackoff": map[string]any{"base": "1s", "multiplier": 2, "max": "8s"}},
		},
	}
}

func (e *env) applyManifest(manifest map[string]any) error {
	data, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err = e.client(e.adminToken).ApplyPool(ctx, data)
	return err
}

// poolStatus asks the pool workflow (through Temporal, so it needs the server and a worker).
func (e *env) poolStatus(timeout time.Duration) (pool.Status, error) {
	return e.poolStatusOf(soakPool, timeout)
}

func (e *env) poolStatusOf(name string, timeout time.Duration) (pool.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var st pool.Status
	v, err := e.temporal.QueryWorkflow(ctx, pool.WorkflowID(name), "", pool.QueryPoolStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// storeWithPassword makes a fresh PostgreSQL database owned by a role with a password, so that
// the DSN kobe is given holds a real secret for the scan to look for.
func storeWithPassword(t *testing.T) (dsn, password string) {
	admin := os.Getenv("KOBE_TEST_POSTGRES")
	if admin == "" {
		admin = testsuite.DefaultPostgresAdminDSN
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	role := "kobe_soak_" + hex.EncodeToString(b[:4])
	password = "soakpw-" + hex.EncodeToString(b[4:]) + "-do-not-log"
	db, err := sql.Open("pgx", admin)
	require.NoError(t, err)
	defer db.Close()
	// Dropped last: after the database it owns (PostgresDSN's cleanup runs first).
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.Exec(`DROP ROLE IF EXISTS ` + role)
	})
	base := testsuite.PostgresDSN(t)
	_, err = db.Exec(fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, role, password))
	require.NoError(t, err)
	u, err := url.Parse(base)
	require.NoError(t, err)
	_, err = db.Exec(fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, u.Path[1:], role))
	require.NoError(t, err)
	u.User = url.UserPassword(role, password)
	return u.String(), password
}
