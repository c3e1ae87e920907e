package cliconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
)

func TestPath(t *testing.T) {
	t.Setenv("KOBE_CONFIG", "/etc/kobe.yaml")
	p, err := Path()
	require.NoError(t, err)
	assert.Equal(t, "/etc/kobe.yaml", p)

	t.Setenv("KOBE_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	p, err = Path()
	require.NoError(t, err)
	assert.Equal(t, "/xdg/kobe/config.yaml", p)

	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/me")
	p, err = Path()
	require.NoError(t, err)
	assert.Equal(t, "/home/me/.config/kobe/config.yaml", p)
}

func TestWriteContextCreatesAPrivateFileAndKeepsOtherContexts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "config.yaml")
	t.Setenv("KOBE_CONFIG", path)

	require.NoError(t, WriteContext("prod", "https://kobe.example.com", "", false))
	require.NoError(t, WriteContext("dev", "http://127.0.0.1:8080", "/state/admin-token", true))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `contexts:
  dev:
    server: http://127.0.0.1:8080
    token-file: /state/admin-token
  prod:
    server: https://kobe.example.com
current-context: dev
`, string(data))

	// Rewriting a context replaces it whole; the current context stays when makeCurrent is false.
	require.NoError(t, WriteContext("prod", "https://kobe2.example.com", "tok", false))
	c, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "dev", c.CurrentContext)
	wd, _ := os.Getwd()
	assert.Equal(t, Context{Server: "https://kobe2.example.com", TokenFile: filepath.Join(wd, "tok")}, c.Contexts["prod"], "relative token files are made absolute")

	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	require.Error(t, WriteContext("a b", "http://x", "", false))
}

func TestLoadRejectsTyposAndBothTokens(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte("contexts:\n  dev:\n    tokenfile: /x\n"), 0o600))
	_, err := Load(p)
	require.ErrorContains(t, err, "tokenfile")

	require.NoError(t, os.WriteFile(p, []byte("contexts:\n  dev:\n    token: a\n    token-file: /x\n"), 0o600))
	_, err = Load(p)
	require.ErrorContains(t, err, "contexts.dev")

	c, err := Load(filepath.Join(dir, "missing.yaml"))
	require.NoError(t, err)
	assert.Empty(t, c.Contexts)
}

// lookup is an environment of the given variables, for Resolve.
func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolvePrecedence(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "admin-token")
	require.NoError(t, os.WriteFile(tokFile, []byte("file-token\n"), 0o600))
	path := filepath.Join(dir, "config.yaml")
	c := &Config{CurrentContext: "dev", Contexts: map[string]Context{
		"dev":  {Server: "http://dev:8080", TokenFile: tokFile},
		"prod": {Server: "https://prod", Token: "prod-token"},
		"bare": {Server: "http://bare"},
	}}
	require.NoError(t, c.Save(path))

	for _, tc := range []struct {
		name string
		o    Overrides
		env  map[string]string
		want Target
	}{
		{"current context", Overrides{}, nil,
			Target{Server: "http://dev:8080", Token: "file-token", Context: "dev", ServerFrom: "context dev", TokenFrom: "context dev"}},
		{"--context beats the current one", Overrides{Context: "prod"}, nil,
			Target{Server: "https://prod", Token: "prod-token", Context: "prod", ServerFrom: "context prod", TokenFrom: "context prod"}},
		{"env beats the context", Overrides{Context: "prod"}, map[string]string{"KOBE_SERVER": "http://env", "KOBE_TOKEN": "env-token"},
			Target{Server: "http://env", Token: "env-token", ServerFrom: "KOBE_SERVER", TokenFrom: "KOBE_TOKEN"}},
		{"flags beat env", Overrides{Server: "http://flag", Token: "flag-token"}, map[string]string{"KOBE_SERVER": "http://env", "KOBE_TOKEN": "env-token"},
			Target{Server: "http://flag", Token: "flag-token", ServerFrom: "--server", TokenFrom: "--token"}},
		{"the context's token only goes to the context's server", Overrides{}, map[string]string{"KOBE_SERVER": "http://elsewhere"},
			Target{Server: "http://elsewhere", ServerFrom: "KOBE_SERVER"}},
		{"--server elsewhere gets no context token", Overrides{Server: "https://evil.example.com", Context: "prod"}, nil,
			Target{Server: "https://evil.example.com", ServerFrom: "--server"}},
		{"server from env, token from the context of that server", Overrides{}, map[string]string{"KOBE_SERVER": "http://DEV:8080/"},
			Target{Server: "http://DEV:8080/", Token: "file-token", Context: "dev", ServerFrom: "KOBE_SERVER", TokenFrom: "context dev"}},
		{"a context without a token", Overrides{Context: "bare"}, nil,
			Target{Server: "http://bare", Context: "bare", ServerFrom: "context bare"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.o, lookup(tc.env), path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	t.Run("default without a config", func(t *testing.T) {
		got, err := Resolve(Overrides{}, lookup(nil), filepath.Join(dir, "none.yaml"))
		require.NoError(t, err)
		assert.Equal(t, Target{Server: DefaultServer, ServerFrom: "default"}, got)
	})
	t.Run("unknown --context", func(t *testing.T) {
		_, err := Resolve(Overrides{Context: "staging", Server: "http://x", Token: "t"}, lookup(nil), path)
		require.ErrorContains(t, err, `--context "staging"`)
		assert.ErrorContains(t, err, "bare, dev, prod")
	})
	t.Run("a broken token file does not matter for another server", func(t *testing.T) {
		c.Contexts["dev"] = Context{Server: "http://dev:8080", TokenFile: filepath.Join(dir, "gone")}
		require.NoError(t, c.Save(path))
		got, err := Resolve(Overrides{Server: "http://other"}, lookup(nil), path)
		require.NoError(t, err)
		assert.Equal(t, Target{Server: "http://other", ServerFrom: "--server"}, got)
		c.Contexts["dev"] = Context{Server: "http://dev:8080", TokenFile: tokFile}
		require.NoError(t, c.Save(path))
	})
	t.Run("flags need no config file", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("nonsense: [\n"), 0o600))
		got, err := Resolve(Overrides{Server: "http://x", Token: "t"}, lookup(nil), bad)
		require.NoError(t, err)
		assert.Equal(t, "http://x", got.Server)
		_, err = Resolve(Overrides{}, lookup(nil), bad)
		require.Error(t, err)
	})
	t.Run("missing token file", func(t *testing.T) {
		c.Contexts["dev"] = Context{Server: "http://dev", TokenFile: filepath.Join(dir, "gone")}
		require.NoError(t, c.Save(path))
		_, err := Resolve(Overrides{}, lookup(nil), path)
		require.ErrorContains(t, err, "context dev: token-file")
	})
	t.Run("dangling current context", func(t *testing.T) {
		c.CurrentContext = "old"
		require.NoError(t, c.Save(path))
		_, err := Resolve(Overrides{}, lookup(nil), path)
		require.ErrorContains(t, err, "kobe context use")
	})
}

// How the server's certificate is checked follows the server: flags, else the environment,
// else the context whose server it is (never another server's CA or trust).
func TestResolveTLS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	c := &Config{CurrentContext: "prod", Contexts: map[string]Context{
		"prod": {Server: "https://prod", Token: "t", CertificateAuthority: "/etc/prod-ca.pem"},
		"lab":  {Server: "https://lab", Token: "t", InsecureSkipTLSVerify: true},
	}}
	require.NoError(t, c.Save(path))
	for _, tc := range []struct {
		name string
		o    Overrides
		env  map[string]string
		want api.TLSOptions
	}{
		{"the context's CA", Overrides{}, nil, api.TLSOptions{CAFile: "/etc/prod-ca.pem"}},
		{"the context's insecure-skip-tls-verify", Overrides{Context: "lab"}, nil, api.TLSOptions{InsecureSkipVerify: true}},
		{"the flag beats the context", Overrides{TLS: api.TLSOptions{CAFile: "/flag.pem"}}, map[string]string{"KOBE_CERTIFICATE_AUTHORITY": "/env.pem"}, api.TLSOptions{CAFile: "/flag.pem"}},
		{"the environment beats the context", Overrides{}, map[string]string{"KOBE_INSECURE_SKIP_TLS_VERIFY": "true"}, api.TLSOptions{InsecureSkipVerify: true}},
		{"another server gets no context's CA", Overrides{Server: "https://elsewhere"}, nil, api.TLSOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.o, lookup(tc.env), path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.TLS)
		})
	}
	_, err := Resolve(Overrides{}, lookup(map[string]string{"KOBE_INSECURE_SKIP_TLS_VERIFY": "yes please"}), path)
	require.ErrorContains(t, err, "KOBE_INSECURE_SKIP_TLS_VERIFY")

	c.Contexts["both"] = Context{Server: "https://both", CertificateAuthority: "/ca.pem", InsecureSkipTLSVerify: true}
	require.NoError(t, c.Save(path))
	_, err = Load(path)
	require.ErrorContains(t, err, "contexts.both: give certificate-authority or insecure-skip-tls-verify, not both")
	delete(c.Contexts, "both")
	require.NoError(t, c.Save(path))

	// kobe dev rewriting its context keeps the trust set on it while its server stays the same.
	t.Setenv("KOBE_CONFIG", path)
	require.NoError(t, WriteContext("prod", "https://prod", "", true))
	again, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "/etc/prod-ca.pem", again.Contexts["prod"].CertificateAuthority)
	require.NoError(t, WriteContext("prod", "https://prod-2", "", true))
	again, err = Load(path)
	require.NoError(t, err)
	assert.Empty(t, again.Contexts["prod"].CertificateAuthority, "a CA is not carried to another server")
}
