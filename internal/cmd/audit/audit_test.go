package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmdAudit(&factory.Factory{IOStreams: ios}, func(o *Options) error { got = o; return nil })
	require.NoError(t, cmdtest.Run(cmd, "--since", "1h", "--actor", "alice", "--pool", "ci", "--action", "lease.created",
		"--after", "10", "--limit", "5", "-o", "yaml"))
	assert.Equal(t, api.AuditQuery{Since: "1h", Actor: "alice", Pool: "ci", Action: "lease.created", After: 10, Limit: 5}, got.Query)
	assert.Equal(t, "yaml", got.Output.String())

	require.NoError(t, cmdtest.Run(NewCmdAudit(&factory.Factory{IOStreams: ios}, func(o *Options) error { got = o; return nil }),
		"--since", "2025-06-01T00:00:00Z"))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, `--since "yesterday": want a duration`},
		{[]string{"--since", "-1h"}, "--since -1h: must be a positive duration"},
		{[]string{"--limit", "-1"}, "--limit -1"},
		{[]string{"--limit", "many"}, `"--limit"`},
		{[]string{"-o", "csv"}, `-o "csv": must be table, json or yaml`},
		{[]string{"extra"}, "unknown command"},
	} {
		ran := false
		err := cmdtest.Run(NewCmdAudit(&factory.Factory{IOStreams: ios}, func(*Options) error { ran = true; return nil }), tc.args...)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
	}
}

func TestAudit(t *testing.T) {
	a := cmdtest.New(t)
	f, ios := a.Factory()
	out := ios.Out.(*bytes.Buffer)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a.Audit = []api.AuditEvent{
		{ID: 41, Time: at, Actor: "alice", Action: "lease.created", Target: "lease-1", Result: "ok", Detail: map[string]any{"pool": "ci", "ttl": "1h"}},
		{ID: 42, Time: at.Add(time.Minute), Actor: "kobe", Action: "lease.bound", Target: "lease-1", Result: "ok", Detail: map[string]any{"ms": 3.5}},
	}
	require.NoError(t, cmdtest.Run(NewCmdAudit(f, nil), "--since", "1h", "--pool", "ci", "--limit", "2"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^ID\s+TIME\s+ACTOR\s+ACTION\s+TARGET\s+RESULT\s+DETAIL$`, lines[0])
	assert.Regexp(t, `^41\s+2030-01-02T03:04:05Z\s+alice\s+lease.created\s+lease-1\s+ok\s+pool=ci ttl=1h$`, lines[1])
	assert.Regexp(t, `^42\s+2030-01-02T03:05:05Z\s+kobe\s+lease.bound\s+lease-1\s+ok\s+ms=3.5$`, lines[2])
	assert.Equal(t, []string{"GET /v1/audit?limit=2&pool=ci&since=1h"}, a.Seen())

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdAudit(f, nil), "-o", "json"))
	var list api.AuditList
	require.NoError(t, json.Unmarshal(out.Bytes(), &list))
	assert.Len(t, list.Items, 2)
}
