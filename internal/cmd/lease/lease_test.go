package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func testFactory() *factory.Factory {
	ios, _, _, _ := iostreams.Test()
	return &factory.Factory{IOStreams: ios}
}

// --- flags (runF: nothing runs) ---

func TestCreateFlags(t *testing.T) {
	var got *CreateOptions
	cmd := NewCmdCreate(testFactory(), func(o *CreateOptions) error { got = o; return nil })
	require.NoError(t, cmdtest.Run(cmd, "ci", "--ttl", "90m", "--name", "e2e", "--metadata", "job=42", "--metadata", "q=a=b",
		"--priority", "3", "--idempotency-key", "k1", "--wait-timeout", "2m", "-o", "yaml"))
	assert.Equal(t, "ci", got.Pool)
	assert.Equal(t, 90*time.Minute, got.TTL)
	assert.Equal(t, "e2e", got.Name)
	assert.Equal(t, map[string]string{"job": "42", "q": "a=b"}, got.Metadata)
	assert.Equal(t, 3, got.Priority)
	assert.Equal(t, "k1", got.IdempotencyKey)
	assert.Equal(t, 2*time.Minute, got.WaitTimeout)
	assert.False(t, got.Wait)
	assert.Equal(t, "yaml", got.Output.String())

	for _, args := range [][]string{{"ci", "--kubeconfig", "kc"}, {"ci", "-o", "kubeconfig"}} {
		cmd = NewCmdCreate(testFactory(), func(o *CreateOptions) error { got = o; return nil })
		require.NoError(t, cmdtest.Run(cmd, args...))
		assert.True(t, got.Wait, "%v implies --wait", args)
	}

	cmd = NewCmdCreate(testFactory(), func(o *CreateOptions) error { got = o; return nil })
	require.NoError(t, cmdtest.Run(cmd, "ci"))
	assert.Equal(t, time.Duration(0), got.TTL, "no --ttl: the pool's")
	assert.Equal(t, 10*time.Minute, got.WaitTimeout)
	assert.Equal(t, "table", got.Output.String())
}

// rejects runs cmd and checks it fails with want before running anything.
func rejects(t *testing.T, newCmd func(ran *bool) *cobra.Command, args []string, want string) {
	t.Helper()
	ran := false
	err := cmdtest.Run(newCmd(&ran), args...)
	require.Error(t, err, "%v", args)
	assert.Contains(t, err.Error(), want, "%v", args)
	assert.False(t, ran, "%v: nothing may run", args)
}

func TestFlagsRejected(t *testing.T) {
	create := func(ran *bool) *cobra.Command {
		return NewCmdCreate(testFactory(), func(*CreateOptions) error { *ran = true; return nil })
	}
	list := func(ran *bool) *cobra.Command {
		return NewCmdList(testFactory(), func(*ListOptions) error { *ran = true; return nil })
	}
	get := func(ran *bool) *cobra.Command {
		return NewCmdGet(testFactory(), func(*GetOptions) error { *ran = true; return nil })
	}
	extend := func(ran *bool) *cobra.Command {
		return NewCmdExtend(testFactory(), func(*ExtendOptions) error { *ran = true; return nil })
	}
	release := func(ran *bool) *cobra.Command {
		return NewCmdRelease(testFactory(), func(*ReleaseOptions) error { *ran = true; return nil })
	}
	kubeconfig := func(ran *bool) *cobra.Command {
		return NewCmdKubeconfig(testFactory(), func(*KubeconfigOptions) error { *ran = true; return nil })
	}
	for _, tc := range []struct {
		cmd  func(*bool) *cobra.Command
		args []string
		want string
	}{
		{create, nil, "give the pool"},
		{create, []string{"ci", "dev"}, "give the pool"},
		{create, []string{"ci", "-o", "xml"}, `-o "xml": must be table, json, yaml or kubeconfig`},
		{create, []string{"ci", "--ttl", "soon"}, `"--ttl"`},
		{create, []string{"ci", "--ttl", "-5m"}, "--ttl -5m0s: must be a positive duration"},
		{create, []string{"ci", "--wait-timeout", "0s"}, "--wait-timeout"},
		{create, []string{"ci", "--metadata", "novalue"}, `--metadata "novalue": want key=value`},
		{create, []string{"ci", "--metadata", "a=1", "--metadata", "a=2"}, "given twice"},
		{create, []string{"ci", "--priority", "high"}, `"--priority"`},
		{list, []string{"extra"}, "unknown command"},
		{list, []string{"-o", "kubeconfig"}, `-o "kubeconfig": must be table, json or yaml`},
		{get, nil, "give the lease id or name"},
		{get, []string{"l1", "-o", "wide"}, `-o "wide"`},
		{get, []string{"l1", "--wait-timeout", "-1s"}, "--wait-timeout"},
		{extend, []string{"l1"}, "--ttl 0s: must be a positive duration"},
		{extend, []string{"--ttl", "1h"}, "give the lease id"},
		{extend, []string{"l1", "--ttl", "1x"}, `"--ttl"`},
		{extend, []string{"l1", "--ttl", "1h", "-o", "csv"}, `-o "csv"`},
		{release, nil, "give the id of the lease"},
		{kubeconfig, nil, "give the lease id or name"},
		{kubeconfig, []string{"a", "b"}, "give the lease id or name"},
	} {
		rejects(t, tc.cmd, tc.args, tc.want)
	}
}

// --- behaviour against the fake API ---

type env struct {
	api *cmdtest.API
	f   *factory.Factory
	ios *iostreams.IOStreams
}

func newEnv(t *testing.T) env {
	a := cmdtest.New(t)
	f, ios := a.Factory()
	return env{a, f, ios}
}

func (e env) out() string    { return e.ios.Out.(*bytes.Buffer).String() }
func (e env) errOut() string { return e.ios.ErrOut.(*bytes.Buffer).String() }

func (e env) create(args ...string) error {
	cmd := NewCmdCreate(e.f, func(o *CreateOptions) error {
		o.PollInterval = 5 * time.Millisecond
		return createRun(context.Background(), o)
	})
	return cmdtest.Run(cmd, args...)
}

func TestCreateWithoutWaitPrintsThePendingLease(t *testing.T) {
	e := newEnv(t)
	e.api.QueuePosition = 2
	require.NoError(t, e.create("ci", "--ttl", "2h", "--name", "e2e", "--metadata", "job=42"))
	out := e.out()
	assert.Regexp(t, `ID:\s+lease-0001`, out)
	assert.Regexp(t, `Phase:\s+Pending \(queued #2 in pool ci\)`, out)
	assert.Regexp(t, `Metadata:\s+job=42`, out)
	l := e.api.OnlyLease(t)
	assert.Regexp(t, `^kobe-client-[0-9a-f]{32}$`, e.api.IdempotencyKey(l.ID), "without --idempotency-key the client sends its own")
	assert.Equal(t, "2h0m0s", l.EffectiveTTL)
	assert.Equal(t, "e2e", l.Alias)
	assert.Equal(t, []string{"POST /v1/leases"}, e.api.Seen())
}

func TestCreateWaitsUntilBoundAndWritesTheKubeconfig(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls, e.api.QueuePosition = 2, 3
	kc := filepath.Join(t.TempDir(), "dir", "kubeconfig")
	require.NoError(t, os.MkdirAll(filepath.Dir(kc), 0o755))
	require.NoError(t, os.WriteFile(kc, []byte("old"), 0o644))
	require.NoError(t, e.create("ci", "--wait", "--kubeconfig", kc, "-o", "json"))

	var got api.Lease
	require.NoError(t, json.Unmarshal([]byte(e.out()), &got))
	assert.Equal(t, api.LeaseBound, got.Phase)
	data, err := os.ReadFile(kc)
	require.NoError(t, err)
	assert.Equal(t, cmdtest.Kubeconfig(got.ID), string(data))
	fi, err := os.Stat(kc)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, []string{"POST /v1/leases", "GET /v1/leases/lease-0001?wait=30s", "GET /v1/leases/lease-0001?wait=30s",
		"GET /v1/leases/lease-0001?wait=30s"}, e.api.Seen())
	assert.Empty(t, e.errOut(), "no progress line when stderr is not a terminal")
}

func TestCreateOutputKubeconfigAndTTYProgress(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls, e.api.QueuePosition = 2, 3
	e.ios.SetStderrTTY(true)
	require.NoError(t, e.create("ci", "-o", "kubeconfig"))
	assert.Equal(t, cmdtest.Kubeconfig("lease-0001"), e.out())
	assert.Contains(t, e.errOut(), "queued #3 in pool ci, 0s")
	assert.Contains(t, e.errOut(), "queued #2 in pool ci")
	assert.True(t, strings.HasSuffix(e.errOut(), "\r\x1b[K"), "the progress line is cleared at the end")
}

func TestCreateYAMLAndTTYDescribe(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.create("ci", "--wait", "-o", "yaml"))
	var got api.Lease
	require.NoError(t, yaml.Unmarshal([]byte(e.out()), &got))
	assert.Equal(t, api.LeaseBound, got.Phase)
	assert.Contains(t, e.out(), "effective_ttl: 1h0m0s", "YAML keeps the wire names")

	e = newEnv(t)
	e.ios.SetStdoutTTY(true)
	require.NoError(t, e.create("ci", "--wait"))
	assert.Regexp(t, `Expires:\s+in (59m|1h)`, e.out())
	assert.Regexp(t, `Kubeconfig:\s+kobe lease kubeconfig lease-0001`, e.out())
}

func TestCreateFailedLease(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls, e.api.FailReason = 1, api.ReasonPoolExhausted
	err := e.create("ci", "--wait")
	require.Error(t, err)
	var ended *cmdutil.LeaseEndedError
	require.ErrorAs(t, err, &ended)
	assert.Equal(t, "lease lease-0001 is Failed (reason pool_exhausted)", err.Error())
	assert.Contains(t, cmdutil.Hint(err), "maxClusters")
}

// A lease the orphan reaper gave up (its API stopped before it started it) ends the wait with
// its reason and says what to do.
func TestCreateOrphanedLease(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls, e.api.FailReason = 1, api.ReasonOrphaned
	err := e.create("ci", "--wait")
	require.Error(t, err)
	assert.Equal(t, "lease lease-0001 is Failed (reason orphaned)", err.Error())
	assert.Contains(t, cmdutil.Hint(err), "create a new one")
}

func TestCreateWaitTimeout(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls, e.api.QueuePosition = 1000, 4
	err := e.create("ci", "--wait", "--wait-timeout", "50ms")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lease lease-0001 is still Pending after --wait-timeout 50ms (queued #")
	assert.Contains(t, err.Error(), "kobe lease release lease-0001")
	assert.Equal(t, api.LeasePending, e.api.OnlyLease(t).Phase, "the lease stays queued")
}

func TestCreateErrorsCarryReasonAndHint(t *testing.T) {
	e := newEnv(t)
	e.api.Quota = 1
	require.NoError(t, e.create("ci"))
	err := e.create("ci")
	require.Error(t, err)
	var buf bytes.Buffer
	assert.Equal(t, 1, cmdutil.Report(&buf, err))
	assert.Contains(t, buf.String(), "kobe: lease from pool ci: Quota exhausted (HTTP 429, reason quota_exhausted): 1 of 1 active leases")
	assert.Contains(t, buf.String(), "hint: your role's quota is used up: 1 of 1 active leases (release a lease")

	err = e.create("nope")
	require.Error(t, err)
	assert.Equal(t, api.ReasonNotFound, api.Reason(err))

	e.f.APIClient = func() (*api.Client, error) { c, _ := api.NewClient(e.api.URL); return c, nil } // no token
	err = e.create("ci")
	buf.Reset()
	cmdutil.Report(&buf, err)
	assert.Contains(t, buf.String(), "reason unauthorized")
	assert.Contains(t, buf.String(), "hint: set --token / KOBE_TOKEN or run `kobe dev` (it writes a context)")
}

func TestCreateIdempotencyKeyReplays(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.create("ci", "--idempotency-key", "job-1", "-o", "json"))
	require.NoError(t, e.create("ci", "--idempotency-key", "job-1", "-o", "json"))
	dec := json.NewDecoder(strings.NewReader(e.out()))
	var a, b api.Lease
	require.NoError(t, dec.Decode(&a))
	require.NoError(t, dec.Decode(&b))
	assert.Equal(t, a.ID, b.ID)
}

func TestListGetExtendReleaseKubeconfig(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.create("ci", "--name", "e2e", "--wait"))
	require.NoError(t, e.create("ci"))

	run := func(cmd *cobra.Command, args ...string) (string, error) {
		e.ios.Out.(*bytes.Buffer).Reset()
		err := cmdtest.Run(cmd, args...)
		return e.out(), err
	}

	out, err := run(NewCmdList(e.f, nil))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^ID\s+NAME\s+POOL\s+PHASE\s+EXPIRES\s+EXTENDED\s+DETAIL$`, lines[0])
	assert.Regexp(t, `^lease-0001\s+e2e\s+ci\s+Bound\s+\d{4}-\d\d-\d\dT\S+Z\s+0\s+cluster ci-1$`, lines[1])
	assert.Regexp(t, `^lease-0002\s+-\s+ci\s+Pending\s+-\s+0\s*$`, lines[2])

	out, err = run(NewCmdList(e.f, nil), "--name", "e2e", "-o", "json")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(strings.TrimSpace(out), "["), "a bare array, as the API sends it: %s", out)
	var list []api.Lease
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 1)
	assert.Contains(t, e.api.Seen(), "GET /v1/leases?alias=e2e")

	e.api.Mu.Lock()
	e.api.Leases["lease-0001"].Conditions = []api.LeaseCondition{{Type: "InstanceHealthy", Status: "False", Reason: "health_failed",
		Message: "3 failed checks", LastTransitionTime: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}
	e.api.Mu.Unlock()
	out, err = run(NewCmdGet(e.f, nil), "e2e")
	require.NoError(t, err)
	assert.Regexp(t, `Condition:\s+InstanceHealthy=False \(health_failed\): 3 failed checks, since 2030-01-02T03:04:05Z`, out)
	assert.Regexp(t, `ID:\s+lease-0001`, out)
	assert.Regexp(t, `Cluster:\s+ci-1 \(https://127.0.0.1:6443\)`, out)

	out, err = run(NewCmdExtend(e.f, nil), "lease-0001", "--ttl", "30m")
	require.NoError(t, err)
	assert.Regexp(t, `^lease lease-0001 now expires \d{4}-`, out)
	assert.Equal(t, 1, e.api.Lease("lease-0001").Extensions)
	out, err = run(NewCmdExtend(e.f, nil), "lease-0001", "--ttl", "30m", "-o", "json")
	require.NoError(t, err)
	var ext api.ExtendResponse
	require.NoError(t, json.Unmarshal([]byte(out), &ext))
	_, err = run(NewCmdExtend(e.f, nil), "lease-0001", "--ttl", "30m")
	require.Error(t, err)
	assert.Equal(t, api.ReasonExtensionBudgetExhausted, api.Reason(err))
	assert.Contains(t, cmdutil.Hint(err), "all the extensions")

	out, err = run(NewCmdKubeconfig(e.f, nil), "e2e")
	require.NoError(t, err)
	assert.Equal(t, cmdtest.Kubeconfig("lease-0001"), out)
	file := filepath.Join(t.TempDir(), "kc")
	_, err = run(NewCmdKubeconfig(e.f, nil), "lease-0001", "--file", file)
	require.NoError(t, err)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, cmdtest.Kubeconfig("lease-0001"), string(data))
	e.api.Mu.Lock()
	e.api.Leases["lease-0001"].Sleeping = true
	e.api.Mu.Unlock()
	_, err = run(NewCmdKubeconfig(e.f, nil), "lease-0001")
	require.ErrorContains(t, err, "lease lease-0001 is asleep: its kubeconfig works once it wakes; wake it with `kobe lease wake lease-0001`")
	e.api.Mu.Lock()
	e.api.Leases["lease-0001"].Sleeping = false
	e.api.Mu.Unlock()
	e.api.PendingPolls = 100
	_, err = run(NewCmdKubeconfig(e.f, nil), "lease-0002")
	require.ErrorContains(t, err, "lease lease-0002 is Pending (waiting for a cluster in pool ci): no kubeconfig yet")

	e.ios.SetStdoutTTY(true)
	out, err = run(NewCmdRelease(e.f, nil), "lease-0001", "lease-0002")
	require.NoError(t, err)
	assert.Equal(t, "released lease-0001\nreleased lease-0002\n", out)
	assert.Equal(t, api.LeaseReleased, e.api.Lease("lease-0001").Phase)
	assert.Equal(t, api.LeaseReleased, e.api.Lease("lease-0002").Phase)
	_, err = run(NewCmdKubeconfig(e.f, nil), "lease-0001")
	require.ErrorContains(t, err, "lease lease-0001 is Released: it has no kubeconfig")

	_, err = run(NewCmdGet(e.f, nil), "missing")
	require.Error(t, err)
	assert.Equal(t, api.ReasonNotFound, api.Reason(err))
}

func TestGetWait(t *testing.T) {
	e := newEnv(t)
	e.api.PendingPolls = 3
	require.NoError(t, e.create("ci"))
	cmd := NewCmdGet(e.f, func(o *GetOptions) error {
		o.PollInterval = time.Millisecond
		return getRun(context.Background(), o)
	})
	require.NoError(t, cmdtest.Run(cmd, "lease-0001", "--wait", "-o", "json"))
	var l api.Lease
	require.NoError(t, json.Unmarshal([]byte(e.out()[strings.Index(e.out(), "{"):]), &l))
	assert.Equal(t, api.LeaseBound, l.Phase)
	assert.Equal(t, cmdtest.Kubeconfig("lease-0001"), l.Kubeconfig)
}
