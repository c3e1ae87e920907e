package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateNamesTheBadSetting(t *testing.T) {
	cases := []struct {
		name string
		mode Mode
		edit func(*Config)
		want string
	}{
		{"bad log format", ModeDev, func(c *Config) { c.LogFormat = "xml" }, "--log-format"},
		{"bad log level", ModeDev, func(c *Config) { c.LogLevel = "loud" }, "--log-level"},
		{"bad api address", ModeDev, func(c *Config) { c.APIAddress = "8080" }, "--api-address"},
		{"bad pprof address", ModeDev, func(c *Config) { c.ProfileAddress = "6060" }, "--pprof-address"},
		{"bad temporal port", ModeDev, func(c *Config) { c.TemporalPort = 70000 }, "--temporal-port"},
		{"ui and temporal clash", ModeDev, func(c *Config) { c.UIPort = c.TemporalPort }, "--ui-port"},
		{"dev bad store", ModeDev, func(c *Config) { c.Store = "mysql://x" }, "--store"},
		{"server needs store", ModeServer, func(c *Config) {}, "--store is required"},
		{"server bad store", ModeServer, func(c *Config) { c.Store = "postgres:///nohost" }, "missing host"},
		{"worker bad temporal", ModeWorker, func(c *Config) { c.Store = "sqlite:///tmp/x.db"; c.Temporal.Address = "nohostport" }, "--temporal-address"},
		{"tls half", ModeServer, func(c *Config) { c.Store = "sqlite:///tmp/x.db"; c.Temporal.TLSCertFile = "/c.pem" }, "must be given together"},
		{"tls missing file", ModeServer, func(c *Config) {
			c.Store = "sqlite:///tmp/x.db"
			c.Temporal.TLSCAFile = "/definitely/missing/ca.pem"
		}, "--temporal-tls-ca"},
		{"empty namespace", ModeWorker, func(c *Config) { c.Store = "sqlite:///tmp/x.db"; c.Temporal.Namespace = "" }, "--temporal-namespace"},
		{"no-worker with an in-memory store", ModeDev, func(c *Config) { c.NoWorker = true; c.Ephemeral = true }, "--no-worker"},
		{"no-worker with an explicit in-memory store", ModeDev, func(c *Config) { c.NoWorker = true; c.Store = "sqlite://:memory:" }, "--no-worker"},
		{"no-worker outside dev", ModeWorker, func(c *Config) { c.Store = "sqlite:///tmp/x.db"; c.NoWorker = true }, "--no-worker"},
		{"host kubeconfig missing", ModeWorker, func(c *Config) {
			c.Store = "sqlite:///tmp/x.db"
			c.HostKubeconfig = "/definitely/missing/host.kubeconfig"
		}, "--host-kubeconfig"},
		{"host kubeconfig missing in dev", ModeDev, func(c *Config) { c.HostKubeconfig = "/definitely/missing/host.kubeconfig" }, "--host-kubeconfig"},
		{"orphan grace too short", ModeWorker, func(c *Config) { c.Store = "sqlite:///tmp/x.db"; c.OrphanGrace = 30 * time.Second }, "--orphan-grace 30s: must be at least 1m0s"},
		{"orphan grace zero in dev", ModeDev, func(c *Config) { c.OrphanGrace = 0 }, "--orphan-grace"},
		{"resources kubeconfig missing", ModeDev, func(c *Config) { c.ResourcesKubeconfig = "/definitely/missing/resources.kubeconfig" }, "--resources-kubeconfig"},
		{"resources from two places", ModeDev, func(c *Config) {
			c.ResourcesKubeconfig = "/definitely/missing/resources.kubeconfig"
			c.ResourcesInCluster = true
		}, "--resources-kubeconfig and --resources-in-cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.edit(&c)
			err := c.Validate(tc.mode)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
	ok := Default()
	require.NoError(t, ok.Validate(ModeDev))
	ok.NoWorker = true
	require.NoError(t, ok.Validate(ModeDev), "--no-worker with the state dir's store file")
	ok.Ephemeral, ok.Store = true, "postgres://kobe@db:5432/kobe"
	require.NoError(t, ok.Validate(ModeDev), "--no-worker --ephemeral with a store a worker can reach")
	ok = Default()
	ok.Store = "postgres://kobe@db:5432/kobe"
	require.NoError(t, ok.Validate(ModeServer))
	require.NoError(t, ok.Validate(ModeWorker))
}

func TestTemporalAPIKeyFileIsCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	cases := map[string]struct {
		path string
		want string
	}{
		"missing":   {filepath.Join(dir, "absent"), "--temporal-api-key-file: open"},
		"empty":     {write("empty", " \n"), "the file is empty"},
		"two lines": {write("two", "key-one\nkey-two\n"), "more than one line"},
		"directory": {dir, "--temporal-api-key-file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default()
			c.Store = "postgres://kobe@db:5432/kobe"
			c.Temporal.APIKeyFile = tc.path
			err := c.Validate(ModeWorker)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// An API key together with a client certificate is accepted: Temporal Cloud lets a
	// namespace accept both, and the SDK sends both.
	c := Default()
	c.Store = "postgres://kobe@db:5432/kobe"
	c.Temporal.APIKeyFile = write("key", "tcld-key\n")
	c.Temporal.TLSCertFile, c.Temporal.TLSKeyFile = write("c.pem", "x"), write("k.pem", "x")
	require.NoError(t, c.Validate(ModeServer))
	key, err := ReadAPIKeyFile(c.Temporal.APIKeyFile)
	require.NoError(t, err)
	assert.Equal(t, "tcld-key", key, "the trailing newline is not part of the key")
}

func TestEnvironmentSetsFlagsButFlagsWin(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	c.AddFlags(fs, ModeServer)
	require.NoError(t, fs.Parse([]string{"--temporal-namespace", "from-flag"}))
	env := map[string]string{
		"KOBE_TEMPORAL_ADDRESS":   "temporal:7233",
		"KOBE_TEMPORAL_NAMESPACE": "from-env",
		"KOBE_STORE":              "postgres://kobe@db/kobe",
	}
	require.NoError(t, ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	assert.Equal(t, "temporal:7233", c.Temporal.Address)
	assert.Equal(t, "from-flag", c.Temporal.Namespace)
	assert.Equal(t, "postgres://kobe@db/kobe", c.Store)

	fs2 := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	c2 := Default()
	c2.AddFlags(fs2, ModeDev)
	err := ApplyEnv(fs2, func(k string) (string, bool) {
		if k == "KOBE_TEMPORAL_PORT" {
			return "seventy", true
		}
		return "", false
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KOBE_TEMPORAL_PORT")
}

func TestFlagsPerMode(t *testing.T) {
	has := func(mode Mode, name string) bool {
		c := Default()
		fs := pflag.NewFlagSet(string(mode), pflag.ContinueOnError)
		c.AddFlags(fs, mode)
		return fs.Lookup(name) != nil
	}
	for _, f := range []string{"state-dir", "api-address", "temporal-port", "ui-port", "ephemeral", "log-format", "log-level"} {
		assert.True(t, has(ModeDev, f), f)
	}
	for _, f := range []string{"temporal-address", "temporal-namespace", "temporal-tls-cert", "temporal-tls-key", "temporal-tls-ca", "temporal-api-key-file", "store", "api-address"} {
		assert.True(t, has(ModeServer, f), f)
	}
	assert.True(t, has(ModeWorker, "metrics-address"))
	for _, m := range []Mode{ModeDev, ModeServer, ModeWorker} {
		assert.True(t, has(m, "pprof-address"), m)
	}
	assert.False(t, has(ModeWorker, "api-address"))
	assert.True(t, has(ModeDev, "no-worker"))
	assert.False(t, has(ModeWorker, "no-worker"))
	assert.False(t, has(ModeServer, "no-worker"))
	// The host cluster is the workers' (where the backends run), not the API server's.
	assert.True(t, has(ModeDev, "host-kubeconfig"))
	assert.True(t, has(ModeWorker, "host-kubeconfig"))
	assert.False(t, has(ModeServer, "host-kubeconfig"))
	// The orphan reaper's grace is set on its schedule by the workers.
	assert.True(t, has(ModeDev, "orphan-grace"))
	assert.True(t, has(ModeWorker, "orphan-grace"))
	assert.False(t, has(ModeServer, "orphan-grace"))
	// TLS is the API's; every mode can guard its /metrics.
	for _, f := range []string{"tls-cert-file", "tls-key-file", "insecure-http"} {
		assert.True(t, has(ModeServer, f), f)
		assert.True(t, has(ModeDev, f), f)
		assert.False(t, has(ModeWorker, f), f)
	}
	for _, m := range []Mode{ModeDev, ModeServer, ModeWorker} {
		assert.True(t, has(m, "metrics-token-file"), m)
	}
	// The ClusterPool controller runs beside the API, which it changes pools through.
	for _, f := range []string{"resources-kubeconfig", "resources-in-cluster", "resources-lease-namespace"} {
		assert.True(t, has(ModeServer, f), f)
		assert.True(t, has(ModeDev, f), f)
		assert.False(t, has(ModeWorker, f), f)
	}
}

// An API on the network serves HTTPS, or plain HTTP only when told with --insecure-http;
// loopback needs neither. The refusal names the flags that lift it.
func TestAPIOnTheNetworkNeedsTLSOrInsecureHTTP(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(cert, []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(key, []byte("x"), 0o600))
	server := func(addr string) Config {
		c := Default()
		c.Store, c.APIAddress = "sqlite:///tmp/x.db", addr
		return c
	}
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "10.1.2.3:8080", "kobe.example.com:443"} {
		for _, mode := range []Mode{ModeServer, ModeDev} {
			c := server(addr)
			err := c.Validate(mode)
			require.Error(t, err, "%s %s", mode, addr)
			assert.Contains(t, err.Error(), "--api-address "+addr+" is not a loopback address")
			assert.Contains(t, err.Error(), "--insecure-http")
			assert.Contains(t, err.Error(), "--tls-cert-file")

			c.InsecureHTTP = true
			assert.NoError(t, c.Validate(mode), "%s %s --insecure-http", mode, addr)
			c.InsecureHTTP, c.TLSCertFile, c.TLSKeyFile = false, cert, key
			assert.NoError(t, c.Validate(mode), "%s %s with TLS", mode, addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.0.0.2:0"} {
		c := server(addr)
		assert.NoError(t, c.Validate(ModeServer), addr)
	}
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"cert without key":     {func(c *Config) { c.TLSCertFile = cert }, "--tls-cert-file and --tls-key-file must be given together"},
		"key without cert":     {func(c *Config) { c.TLSKeyFile = key }, "--tls-cert-file and --tls-key-file must be given together"},
		"missing key":          {func(c *Config) { c.TLSCertFile, c.TLSKeyFile = cert, filepath.Join(dir, "none") }, "--tls-key-file"},
		"TLS and insecure":     {func(c *Config) { c.TLSCertFile, c.TLSKeyFile, c.InsecureHTTP = cert, key, true }, "choose one"},
		"missing metrics file": {func(c *Config) { c.MetricsTokenFile = filepath.Join(dir, "none") }, "--metrics-token-file"},
	} {
		c := server("127.0.0.1:8080")
		tc.edit(&c)
		assert.ErrorContains(t, c.Validate(ModeServer), tc.want, name)
	}
	// Like every flag, they come from KOBE_* variables too.
	c := server("0.0.0.0:8080")
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	c.AddFlags(fs, ModeServer)
	env := map[string]string{"KOBE_TLS_CERT_FILE": cert, "KOBE_TLS_KEY_FILE": key, "KOBE_METRICS_TOKEN_FILE": key}
	require.NoError(t, ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	assert.Equal(t, cert, c.TLSCertFile)
	assert.Equal(t, key, c.MetricsTokenFile)
	assert.NoError(t, c.Validate(ModeServer))

	// A worker's metrics listener is not the API: its address needs neither.
	w := Default()
	w.Store, w.MetricsAddress = "sqlite:///tmp/x.db", "0.0.0.0:9090"
	assert.NoError(t, w.Validate(ModeWorker))
}

func TestDevStoreDSN(t *testing.T) {
	c := Default()
	c.StateDir = "/var/lib/kobe"
	assert.Equal(t, "sqlite:///var/lib/kobe/kobe.db", c.DevStoreDSN(), "the file a separate worker opens with --store")
	c.Ephemeral = true
	assert.Equal(t, "sqlite://:memory:", c.DevStoreDSN())
	c.Store = "postgres://kobe@db/kobe"
	assert.Equal(t, "postgres://kobe@db/kobe", c.DevStoreDSN())
}

func TestDefaultStateDirFollowsXDG(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/srv/state")
	assert.Equal(t, "/srv/state/kobe", DefaultStateDir())
}
