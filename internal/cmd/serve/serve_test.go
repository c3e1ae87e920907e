package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/config"
)

func TestDevFlags(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmdDev(&factory.Factory{IOStreams: io}, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--state-dir", "/tmp/k", "--api-address", "127.0.0.1:9999", "--temporal-port", "17233",
		"--ui-port", "0", "--ephemeral", "--log-format", "json", "--log-level", "debug"})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, config.ModeDev, got.Mode)
	assert.Equal(t, "/tmp/k", got.Config.StateDir)
	assert.Equal(t, "127.0.0.1:9999", got.Config.APIAddress)
	assert.Equal(t, 17233, got.Config.TemporalPort)
	assert.Equal(t, 0, got.Config.UIPort)
	assert.True(t, got.Config.Ephemeral)
	assert.Equal(t, "json", got.Config.LogFormat)
}

func TestDevNoWorker(t *testing.T) {
	run := func(args ...string) (*Options, error) {
		io, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmdDev(&factory.Factory{IOStreams: io}, func(o *Options) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return got, cmd.Execute()
	}
	got, err := run("--state-dir", "/tmp/k")
	require.NoError(t, err)
	assert.False(t, got.Config.NoWorker, "a worker by default")

	got, err = run("--state-dir", "/tmp/k", "--no-worker")
	require.NoError(t, err)
	assert.True(t, got.Config.NoWorker)
	assert.Equal(t, "sqlite:///tmp/k/kobe.db", got.Config.DevStoreDSN())

	t.Setenv("KOBE_NO_WORKER", "true")
	got, err = run("--state-dir", "/tmp/k")
	require.NoError(t, err)
	assert.True(t, got.Config.NoWorker, "from the environment")
	t.Setenv("KOBE_NO_WORKER", "")

	got, err = run("--no-worker", "--ephemeral")
	require.Error(t, err, "a worker in another process cannot open an in-memory store")
	assert.Nil(t, got, "refused before running")
	assert.Contains(t, err.Error(), "--no-worker")

	io, _, _, _ := iostreams.Test()
	cmd := NewCmdDev(&factory.Factory{IOStreams: io}, nil)
	assert.Contains(t, cmd.Flags().FlagUsages(), "--no-worker ", "documented in --help")

	wcmd := NewCmdWorker(&factory.Factory{IOStreams: io}, func(o *Options) error { return nil })
	wcmd.SetArgs([]string{"--store", "sqlite:///tmp/x.db", "--no-worker"})
	wcmd.SilenceUsage, wcmd.SilenceErrors = true, true
	err = wcmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown flag: --no-worker")
}

func TestDevDefaults(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/xdg")
	io, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmdDev(&factory.Factory{IOStreams: io}, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(nil)
	require.NoError(t, cmd.Execute())
	assert.Equal(t, "/xdg/kobe", got.Config.StateDir)
	assert.Equal(t, "127.0.0.1:8080", got.Config.APIAddress)
	assert.Equal(t, 7233, got.Config.TemporalPort)
	assert.Equal(t, 8233, got.Config.UIPort)
}

func TestServeRejectsBadInputBeforeRunning(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"extra"}, nil, "unknown command"},
		{nil, map[string]string{"KOBE_UI_PORT": "abc"}, "KOBE_UI_PORT"},
		{[]string{"--temporal-port", "0"}, nil, "--temporal-port"},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		io, _, _, _ := iostreams.Test()
		ran := false
		cmd := NewCmdDev(&factory.Factory{IOStreams: io}, func(o *Options) error { ran = true; return nil })
		cmd.SetArgs(tc.args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
}

func TestServerRequiresAStore(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	cmd := NewCmdServer(&factory.Factory{IOStreams: io}, func(o *Options) error { return nil })
	cmd.SetArgs([]string{"--temporal-address", "t:7233"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--store is required")
	assert.Contains(t, err.Error(), "KOBE_STORE")
}
