package root

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func newRoot(t *testing.T) (*factory.Factory, *bytes.Buffer, string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	t.Setenv("KOBE_CONFIG", path)
	t.Setenv("KOBE_SERVER", "")
	t.Setenv("KOBE_TOKEN", "")
	f := factory.New()
	ios, _, out, _ := iostreams.Test()
	f.IOStreams = ios
	return f, out, path
}

func execute(f *factory.Factory, args ...string) error {
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	cmd.SetOut(f.IOStreams.Out)
	cmd.SetErr(f.IOStreams.ErrOut)
	return cmd.Execute()
}

func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

func TestServerAndTokenPrecedence(t *testing.T) {
	f, _, _ := newRoot(t)
	tokFile := filepath.Join(t.TempDir(), "admin-token")
	require.NoError(t, os.WriteFile(tokFile, []byte("dev-token\n"), 0o600))
	require.NoError(t, cliconfig.WriteContext("dev", "http://127.0.0.1:9999", tokFile, true))
	require.NoError(t, cliconfig.WriteContext("prod", "https://kobe.example.com", "", false))

	// The current context.
	require.NoError(t, execute(f, "version"))
	tg, err := f.Target()
	require.NoError(t, err)
	assert.Equal(t, cliconfig.Target{Server: "http://127.0.0.1:9999", Token: "dev-token", Context: "dev", ServerFrom: "context dev", TokenFrom: "context dev"}, tg)
	c, err := f.APIClient()
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9999", c.BaseURL)
	assert.Equal(t, "dev-token", c.Token)
}

func TestFlagsOverEnvOverContext(t *testing.T) {
	f, _, path := newRoot(t)
	c := &cliconfig.Config{CurrentContext: "dev", Contexts: map[string]cliconfig.Context{
		"dev":  {Server: "http://dev", Token: "dev-token"},
		"prod": {Server: "https://prod", Token: "prod-token"},
	}}
	require.NoError(t, c.Save(path))

	require.NoError(t, execute(f, "version", "--context", "prod"))
	tg, err := f.Target()
	require.NoError(t, err)
	assert.Equal(t, "https://prod", tg.Server)
	assert.Equal(t, "prod-token", tg.Token)

	t.Setenv("KOBE_SERVER", "http://env")
	t.Setenv("KOBE_TOKEN", "env-token")
	tg, err = f.Target()
	require.NoError(t, err)
	assert.Equal(t, "http://env", tg.Server)
	assert.Equal(t, "env-token", tg.Token)

	f2, _, _ := newRoot(t)
	t.Setenv("KOBE_CONFIG", path)
	t.Setenv("KOBE_SERVER", "http://env")
	require.NoError(t, execute(f2, "version", "--server", "http://flag", "--token", "flag-token"))
	tg, err = f2.Target()
	require.NoError(t, err)
	assert.Equal(t, "http://flag", tg.Server)
	assert.Equal(t, "flag-token", tg.Token)

	f3, _, _ := newRoot(t)
	require.NoError(t, execute(f3, "version", "--context", "staging"))
	_, err = f3.APIClient()
	require.ErrorContains(t, err, `--context "staging": no such context`)

	f4, _, _ := newRoot(t)
	t.Setenv("KOBE_SERVER", "kobe.example.com")
	_, err = f4.APIClient()
	require.ErrorContains(t, err, `server "kobe.example.com" (from KOBE_SERVER): want a URL`)
}

func TestContextSetFlagsShadowTheGlobalOnes(t *testing.T) {
	f, _, path := newRoot(t)
	require.NoError(t, execute(f, "context", "set", "prod", "--server", "https://prod", "--token", "t"))
	assert.Empty(t, f.Server, "--server of context set is the context's, not the global flag")
	assert.Empty(t, f.Token)
	c, err := cliconfig.Load(path)
	require.NoError(t, err)
	assert.Equal(t, cliconfig.Context{Server: "https://prod", Token: "t"}, c.Contexts["prod"])
}

func TestEveryCommandHasExamples(t *testing.T) {
	f, _, _ := newRoot(t)
	root := NewCmdRoot(f)
	var missing []string
	for _, c := range allCommands(root) {
		if c.Runnable() && c.Example == "" && c.Name() != "help" {
			missing = append(missing, c.CommandPath())
		}
	}
	assert.Empty(t, missing, "commands without examples in --help")
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		f, out, _ := newRoot(t)
		require.NoError(t, execute(f, "completion", sh))
		assert.Contains(t, out.String(), "kobe", sh)
	}
	f, _, _ := newRoot(t)
	err := execute(f, "completion", "tcsh")
	require.ErrorContains(t, err, `invalid argument "tcsh"`)

	// Dynamic completion: -o values and context names.
	f, out, path := newRoot(t)
	require.NoError(t, (&cliconfig.Config{Contexts: map[string]cliconfig.Context{"dev": {Server: "http://x"}, "prod": {Server: "http://y"}}}).Save(path))
	require.NoError(t, execute(f, "__complete", "lease", "list", "-o", ""))
	assert.True(t, strings.HasPrefix(out.String(), "table\njson\nyaml\n"), out.String())
	out.Reset()
	require.NoError(t, execute(f, "__complete", "context", "use", ""))
	assert.True(t, strings.HasPrefix(out.String(), "dev\nprod\n"), out.String())
	out.Reset()
	require.NoError(t, execute(f, "__complete", "status", "--context", ""))
	assert.True(t, strings.HasPrefix(out.String(), "dev\nprod\n"), out.String())
}
