package token

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func testFactory() *factory.Factory {
	ios, _, _, _ := iostreams.Test()
	return &factory.Factory{IOStreams: ios}
}

func TestFlags(t *testing.T) {
	var got *CreateOptions
	require.NoError(t, cmdtest.Run(NewCmdCreate(testFactory(), func(o *CreateOptions) error { got = o; return nil }),
		"--role", "ci", "--name", "gha", "--principal", "bot", "--ttl", "720h", "-o", "json"))
	assert.Equal(t, "ci", got.Role)
	assert.Equal(t, "gha", got.Name)
	assert.Equal(t, "bot", got.Principal)
	assert.Equal(t, 720*time.Hour, got.TTL)
	assert.Equal(t, "json", got.Output.String())

	create := func(ran *bool) *cobra.Command {
		return NewCmdCreate(testFactory(), func(*CreateOptions) error { *ran = true; return nil })
	}
	for _, tc := range []struct {
		cmd  func(*bool) *cobra.Command
		args []string
		want string
	}{
		{create, nil, "--role is required"},
		{create, []string{"--role", "ci", "--ttl", "1month"}, `"--ttl"`},
		{create, []string{"--role", "ci", "--ttl", "-1h"}, "--ttl -1h0m0s: must be a positive duration"},
		{create, []string{"--role", "ci", "-o", "text"}, `-o "text": must be table, json or yaml`},
		{create, []string{"ci"}, "unknown command"},
		{func(ran *bool) *cobra.Command {
			return NewCmdList(testFactory(), func(*ListOptions) error { *ran = true; return nil })
		}, []string{"-o", "xml"}, `-o "xml"`},
		{func(ran *bool) *cobra.Command {
			return NewCmdRevoke(testFactory(), func(*RevokeOptions) error { *ran = true; return nil })
		}, nil, "give the token id"},
	} {
		ran := false
		err := cmdtest.Run(tc.cmd(&ran), tc.args...)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
	}
}

func TestCreateListRevoke(t *testing.T) {
	a := cmdtest.New(t)
	f, ios := a.Factory()
	out, errOut := ios.Out.(*bytes.Buffer), ios.ErrOut.(*bytes.Buffer)

	// Not a terminal: only the secret on stdout, the warning on stderr.
	cmd := NewCmdCreate(f, nil)
	require.NoError(t, cmdtest.Run(cmd, "--role", "ci", "--name", "gha", "--ttl", "720h"))
	assert.Equal(t, "kobe_secret_tok-0001\n", out.String())
	assert.Contains(t, errOut.String(), "shown once and cannot be shown again")
	a.Mu.Lock()
	assert.JSONEq(t, `{"name":"gha","role":"ci","ttl":"720h0m0s"}`, a.Requests[0].Body)
	a.Mu.Unlock()

	// A default name from the role and the time.
	out.Reset()
	errOut.Reset()
	cmd = NewCmdCreate(f, func(o *CreateOptions) error {
		o.Now = func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }
		return createRun(cmd.Context(), o)
	})
	require.NoError(t, cmdtest.Run(cmd, "--role", "developer", "--principal", "alice", "-o", "json"))
	var tok api.Token
	require.NoError(t, json.Unmarshal(out.Bytes(), &tok))
	assert.Equal(t, "developer-20300102-030405", tok.Name)
	assert.Equal(t, "alice", tok.Principal)
	assert.Equal(t, "kobe_secret_tok-0002", tok.Secret)
	assert.Contains(t, errOut.String(), "cannot be shown again")

	// On a terminal: a sentence around the secret.
	out.Reset()
	ios.SetStdoutTTY(true)
	require.NoError(t, cmdtest.Run(NewCmdCreate(f, nil), "--role", "ci", "--name", "x"))
	assert.Contains(t, out.String(), "Created token tok-0003 (name x, role ci, principal x, expires never):\n\n  kobe_secret_tok-0003\n")

	out.Reset()
	ios.SetStdoutTTY(false)
	require.NoError(t, cmdtest.Run(NewCmdRevoke(f, nil), "tok-0001"))
	require.NoError(t, cmdtest.Run(NewCmdList(f, nil)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	assert.Regexp(t, `^ID\s+NAME\s+ROLE\s+PRINCIPAL\s+STATUS\s+CREATED\s+EXPIRES\s+LAST USED$`, lines[0])
	assert.Regexp(t, `^tok-0001\s+gha\s+ci\s+gha\s+revoked\s+\S+Z\s+\S+Z\s+-$`, lines[1])
	assert.Regexp(t, `^tok-0002\s+developer-20300102-030405\s+developer\s+alice\s+active\s+\S+\s+never\s+-$`, lines[2])
	assert.NotContains(t, out.String(), "kobe_secret", "secrets are never listed")

	err := cmdtest.Run(NewCmdRevoke(f, nil), "tok-9")
	require.ErrorContains(t, err, "revoke token tok-9: Token not found")
}

// TestExamplesUseRolesOfTheDefaultPolicy: every `--role R` in the command's examples, the
// README and docs/*.md names a role of the default policy (the one `kobe dev` and a server
// without --policy use), so a reader copying an example gets a token, not a 400 "not a role of
// the policy".
func TestExamplesUseRolesOfTheDefaultPolicy(t *testing.T) {
	texts := map[string]string{"kobe token create's examples": NewCmdCreate(testFactory(), nil).Example}
	docs, err := filepath.Glob(filepath.Join("..", "..", "..", "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range append(docs, filepath.Join("..", "..", "..", "README.md")) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		texts[filepath.Base(f)] = string(data)
	}
	require.Contains(t, texts, "cli.md")
	roles := access.DefaultPolicy().RoleNames()
	role := regexp.MustCompile(`--role[ =]([A-Za-z0-9_.-]+)`)
	for where, text := range texts {
		found := role.FindAllStringSubmatch(text, -1)
		if where == "cli.md" || where == "kobe token create's examples" {
			require.NotEmpty(t, found, "%s show --role", where)
		}
		for _, m := range found {
			if m[1] == "ROLE" {
				continue // the placeholder of a usage line
			}
			assert.Contains(t, roles, m[1], "%s: %s", where, m[0])
		}
	}
}
