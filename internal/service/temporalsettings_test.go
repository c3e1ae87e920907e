package service_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/server/common/dynamicconfig"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// startTemporalWith starts an embedded Temporal whose dynamic config differs from kobe's by
// overrides, as a production Temporal set up without docs/deploy.md's "Temporal" may.
func startTemporalWith(t *testing.T, overrides dynamicconfig.StaticClient) string {
	t.Helper()
	srv, err := devserver.StartTemporal(devserver.TemporalOptions{DynamicConfigOverrides: overrides})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	return srv.FrontendAddress()
}

func serverConfig(t *testing.T, temporalAddr string) config.Config {
	c := config.Default()
	c.Store = migrated(t, "sqlite://"+t.TempDir()+"/kobe.db")
	c.Temporal.Address = temporalAddr
	c.APIAddress = "127.0.0.1:0"
	c.MetricsAddress = "127.0.0.1:0"
	return c
}

func readSettings(t *testing.T, c *api.Client) map[string]api.TemporalSetting {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started, err := c.StartDoctorRequest(ctx, api.DoctorRequest{TemporalSettings: true})
	require.NoError(t, err)
	byName := map[string]api.TemporalSetting{}
	for _, s := range started.Temporal {
		byName[s.Name] = s
	}
	return byName
}

// kobe doctor reads the Temporal settings the bind depends on from the Temporal service kobe
// runs on. Against a Temporal at Temporal's own defaults for what kobe dev changes (four
// partitions per task queue, 10 Updates in flight per workflow) the CLI warns, naming both
// settings, and the run still completes; against one with Updates off it names that; against
// one set as docs/deploy.md says it is clean.
func TestDoctorNamesTheTemporalSettingsThatSlowTheBind(t *testing.T) {
	t.Run("temporal defaults", func(t *testing.T) {
		addr := startTemporalWith(t, dynamicconfig.StaticClient{
			dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  4,
			dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 4,
			dynamicconfig.WorkflowExecutionMaxInFlightUpdates.Key(): 10,
		})
		c := serverConfig(t, addr)
		srv := start(t, c, config.ModeServer)
		start(t, c, config.ModeWorker)
		out, err := runCLI(t, "doctor", "--server", srv.APIURL, "--token", doctorClient(t, srv).Token)
		require.NoError(t, err, "a setting that slows the bind is a warning, the chain works: %s", out)
		assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(server.SettingPartitions)+`\s+WARN\s+task queue kobe: 4 workflow, 4 activity partitions$`), out)
		assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(server.SettingInFlightUpdates)+`\s+WARN\s+10$`), out)
		assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(server.SettingUpdates)+`\s+ok\s+enabled$`), out)
		assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(server.SettingSearchAttributes)+`\s+ok\s`), out)
	})

	t.Run("updates off", func(t *testing.T) {
		addr := startTemporalWith(t, dynamicconfig.StaticClient{
			dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key(): false,
		})
		srv := start(t, serverConfig(t, addr), config.ModeServer)
		settings := readSettings(t, doctorClient(t, srv))
		updates := settings[server.SettingUpdates]
		assert.False(t, updates.OK)
		assert.Equal(t, "disabled", updates.Value)
		assert.Contains(t, updates.Detail, "slow path")
		assert.False(t, settings[server.SettingInFlightUpdates].OK, "not probed, so not vouched for")
		assert.True(t, settings[server.SettingPartitions].OK, settings[server.SettingPartitions].Value)
	})

	t.Run("kobe's settings", func(t *testing.T) {
		tmp := testsuite.StartTemporal(t)
		srv := start(t, serverConfig(t, tmp.Address), config.ModeServer)
		settings := readSettings(t, doctorClient(t, srv))
		for _, name := range []string{server.SettingPartitions, server.SettingSearchAttributes, server.SettingRetention,
			server.SettingEagerStart, server.SettingUpdates, server.SettingInFlightUpdates} {
			s, ok := settings[name]
			require.True(t, ok, "%s is reported", name)
			assert.True(t, s.OK, "%s = %s: %s", name, s.Value, s.Detail)
		}
		assert.Len(t, settings, 6)
		assert.Equal(t, "enabled", settings[server.SettingEagerStart].Value)
		assert.Equal(t, "at least 50", settings[server.SettingInFlightUpdates].Value)
	})
}
