package instance

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

func testFactory() *factory.Factory {
	ios, _, _, _ := iostreams.Test()
	return &factory.Factory{IOStreams: ios}
}

func TestFlags(t *testing.T) {
	var list *ListOptions
	require.NoError(t, cmdtest.Run(NewCmdList(testFactory(), func(o *ListOptions) error { list = o; return nil }),
		"--pool", "ci", "--phase", "Quarantined", "--host", "h1", "-o", "json"))
	assert.Equal(t, "ci", list.Pool)
	assert.Equal(t, "Quarantined", list.Phase)
	assert.Equal(t, "h1", list.Host)
	assert.Equal(t, "json", list.Output.String())

	var forget *ForgetOptions
	require.NoError(t, cmdtest.Run(NewCmdForget(testFactory(), func(o *ForgetOptions) error { forget = o; return nil }), "ci-3", "--force"))
	assert.Equal(t, "ci-3", forget.ID)
	assert.True(t, forget.Force)

	for name, cmd := range map[string]func() error{
		"get":    func() error { return cmdtest.Run(NewCmdGet(testFactory(), nil)) },
		"retry":  func() error { return cmdtest.Run(NewCmdRetry(testFactory(), nil), "a", "b") },
		"forget": func() error { return cmdtest.Run(NewCmdForget(testFactory(), nil)) },
	} {
		assert.ErrorContains(t, cmd(), "give the instance id", name)
	}
	assert.ErrorContains(t, cmdtest.Run(NewCmdList(testFactory(), nil), "-o", "xml"), `-o "xml": must be table, json or yaml`)
}

func setup(t *testing.T) (*cmdtest.API, *factory.Factory, *bytes.Buffer) {
	a := cmdtest.New(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a.Instances["ci-1"] = &api.Instance{ID: "ci-1", Pool: "ci", Backend: "local", Host: "h1", Phase: "Ready", CreatedAt: at, UpdatedAt: at}
	a.Instances["ci-2"] = &api.Instance{ID: "ci-2", Pool: "ci", Backend: "local", Host: "h1", Phase: "Quarantined",
		Message: "deleting ci-2: kube-apiserver still running", Endpoint: "https://127.0.0.1:6443", CreatedAt: at, UpdatedAt: at}
	f, ios := a.Factory()
	return a, f, ios.Out.(*bytes.Buffer)
}

func TestListAndGet(t *testing.T) {
	a, f, out := setup(t)
	require.NoError(t, cmdtest.Run(NewCmdList(f, nil)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	assert.Regexp(t, `^ID\s+POOL\s+BACKEND\s+HOST\s+PHASE\s+UPDATED\s+MESSAGE$`, lines[0])
	assert.Regexp(t, `^ci-1\s+ci\s+local\s+h1\s+Ready\s+2030-01-02T03:04:05Z\s+-$`, lines[1])
	assert.Regexp(t, `^ci-2\s+ci\s+local\s+h1\s+Quarantined\s+2030-01-02T03:04:05Z\s+deleting ci-2: kube-apiserver still running$`, lines[2])

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdList(f, nil), "--phase", "Quarantined", "--pool", "ci", "-o", "json"))
	assert.True(t, strings.HasPrefix(strings.TrimSpace(out.String()), "["), out.String())
	var is []api.Instance
	require.NoError(t, json.Unmarshal(out.Bytes(), &is))
	require.Len(t, is, 1)
	assert.Equal(t, "ci-2", is[0].ID)
	assert.Contains(t, a.Seen(), "GET /v1/instances?phase=Quarantined&pool=ci")

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdGet(f, nil), "ci-2"))
	assert.Regexp(t, `Phase:\s+Quarantined`, out.String())
	assert.Regexp(t, `Message:\s+deleting ci-2: kube-apiserver still running`, out.String())
	assert.Regexp(t, `Next:\s+kobe instance retry ci-2, or clean it up by hand and kobe instance forget ci-2`, out.String())

	err := cmdtest.Run(NewCmdGet(f, nil), "nope")
	require.ErrorContains(t, err, "instance nope: Instance not found (HTTP 404, reason not_found)")
}

func TestRetryAndForget(t *testing.T) {
	a, f, out := setup(t)
	f.IOStreams.SetStdoutTTY(true)
	require.NoError(t, cmdtest.Run(NewCmdRetry(f, nil), "ci-2"))
	assert.Equal(t, "retrying the teardown of ci-2 through its pool; kobe instance get ci-2 shows how it goes\n", out.String())
	assert.Equal(t, []string{"ci-2"}, a.Retried)

	err := cmdtest.Run(NewCmdRetry(f, nil), "ci-1")
	require.ErrorContains(t, err, "retry instance ci-1: Instance not quarantined (HTTP 409, reason not_quarantined): instance ci-1 is Ready")

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdForget(f, nil), "ci-2"))
	assert.Equal(t, "forgot instance ci-2\n", out.String())
	assert.Equal(t, []string{"ci-2"}, a.Forgotten)
	assert.Contains(t, a.Seen(), "DELETE /v1/instances/ci-2")

	err = cmdtest.Run(NewCmdForget(f, nil), "ci-1")
	require.ErrorContains(t, err, "reason not_quarantined")
	require.NoError(t, cmdtest.Run(NewCmdForget(f, nil), "ci-1", "--force"))
	assert.Contains(t, a.Seen(), "DELETE /v1/instances/ci-1?force=true")
	assert.Empty(t, a.Instances)

	// Scripts get no chatter.
	f.IOStreams.SetStdoutTTY(false)
	out.Reset()
	a.Instances["ci-3"] = &api.Instance{ID: "ci-3", Pool: "ci", Phase: "Quarantined"}
	require.NoError(t, cmdtest.Run(NewCmdRetry(f, nil), "ci-3"))
	assert.Empty(t, out.String())
	require.NoError(t, cmdtest.Run(NewCmdRetry(f, nil), "ci-3", "-o", "json"))
	var res api.RetryTeardown
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, api.RetryTeardown{ID: "ci-3", Via: "pool", WorkflowID: "pool-ci"}, res)
}
