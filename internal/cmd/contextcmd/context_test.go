package contextcmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func setup(t *testing.T) (*factory.Factory, *bytes.Buffer, string) {
	path := filepath.Join(t.TempDir(), "kobe", "config.yaml")
	t.Setenv("KOBE_CONFIG", path)
	ios, _, out, _ := iostreams.Test()
	return &factory.Factory{IOStreams: ios}, out, path
}

func TestFlagsRejected(t *testing.T) {
	f, _, _ := setup(t)
	for _, tc := range []struct {
		new  func(ran *bool) error
		want string
	}{
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdUse(f, func(*UseOptions) error { *ran = true; return nil }))
		}, "give the context name"},
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdSet(f, func(*SetOptions) error { *ran = true; return nil }))
		}, "give the context name"},
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdSet(f, func(*SetOptions) error { *ran = true; return nil }), "a b", "--server", "http://x")
		}, "without spaces"},
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdSet(f, func(*SetOptions) error { *ran = true; return nil }), "p", "--server", "kobe.example.com")
		}, "want a URL"},
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdSet(f, func(*SetOptions) error { *ran = true; return nil }), "p", "--token", "t", "--token-file", "f")
		}, "not both"},
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdDelete(f, func(*DeleteOptions) error { *ran = true; return nil }))
		}, "give the context name"},
		{func(ran *bool) error {
			return cmdtest.Run(NewCmdList(f, func(*ListOptions) error { *ran = true; return nil }), "-o", "toml")
		}, `-o "toml": must be table, json or yaml`},
	} {
		ran := false
		err := tc.new(&ran)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
	}
}

func TestSetUseListDelete(t *testing.T) {
	f, out, path := setup(t)
	tokFile := filepath.Join(t.TempDir(), "tok")

	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "dev", "--server", "http://127.0.0.1:8080", "--token-file", tokFile))
	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "prod", "--server", "https://kobe.example.com", "--token", "s3cret"))
	err := cmdtest.Run(NewCmdSet(f, nil), "new", "--token", "x")
	require.ErrorContains(t, err, "give its --server")

	c, err := cliconfig.Load(path)
	require.NoError(t, err)
	assert.Equal(t, "dev", c.CurrentContext, "the first context becomes current")
	assert.Equal(t, cliconfig.Context{Server: "http://127.0.0.1:8080", TokenFile: tokFile}, c.Contexts["dev"])
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// Changing one field keeps the others; a token file replaces an inline token.
	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "prod", "--token-file", tokFile))
	c, _ = cliconfig.Load(path)
	assert.Equal(t, cliconfig.Context{Server: "https://kobe.example.com", TokenFile: tokFile}, c.Contexts["prod"])

	require.NoError(t, cmdtest.Run(NewCmdUse(f, nil), "prod"))
	err = cmdtest.Run(NewCmdUse(f, nil), "staging")
	require.ErrorContains(t, err, `no context "staging"`)

	require.NoError(t, cmdtest.Run(NewCmdList(f, nil)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^CURRENT\s+NAME\s+SERVER\s+TOKEN$`, lines[0])
	assert.Regexp(t, `^\s+dev\s+http://127.0.0.1:8080\s+`+tokFile+`$`, lines[1])
	assert.Regexp(t, `^\*\s+prod\s+https://kobe.example.com\s+`+tokFile+`$`, lines[2])

	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "inline", "--server", "http://x", "--token", "tok-value", "--use"))
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdList(f, nil), "-o", "json"))
	assert.NotContains(t, out.String(), "tok-value", "tokens are never printed")
	var got struct {
		Current string  `json:"current"`
		Items   []Entry `json:"items"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, "inline", got.Current)
	assert.Equal(t, Entry{Name: "inline", Current: true, Server: "http://x", Token: "inline"}, got.Items[1])

	require.NoError(t, cmdtest.Run(NewCmdDelete(f, nil), "inline"))
	c, _ = cliconfig.Load(path)
	assert.Equal(t, "", c.CurrentContext, "deleting the current context leaves none current")
	assert.Equal(t, []string{"dev", "prod"}, c.Names())
	require.ErrorContains(t, cmdtest.Run(NewCmdDelete(f, nil), "inline"), `no context "inline"`)
}

// A context keeps how its server's certificate is checked: a CA bundle (made absolute) or
// insecure-skip-tls-verify, one replacing the other; both at once are refused.
func TestSetCertificateAuthority(t *testing.T) {
	f, _, path := setup(t)
	t.Chdir(t.TempDir())
	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "prod", "--server", "https://kobe.example.com", "--certificate-authority", "ca.pem"))
	c, err := cliconfig.Load(path)
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "ca.pem"), c.Contexts["prod"].CertificateAuthority)

	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "prod", "--insecure-skip-tls-verify"))
	c, _ = cliconfig.Load(path)
	assert.Equal(t, cliconfig.Context{Server: "https://kobe.example.com", InsecureSkipTLSVerify: true}, c.Contexts["prod"])

	require.NoError(t, cmdtest.Run(NewCmdSet(f, nil), "prod", "--certificate-authority", "/etc/ca.pem"))
	c, _ = cliconfig.Load(path)
	assert.Equal(t, cliconfig.Context{Server: "https://kobe.example.com", CertificateAuthority: "/etc/ca.pem"}, c.Contexts["prod"])

	err = cmdtest.Run(NewCmdSet(f, nil), "prod", "--certificate-authority", "/etc/ca.pem", "--insecure-skip-tls-verify")
	require.ErrorContains(t, err, "not both")
}
