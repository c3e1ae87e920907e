package serve

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/cmd/migrate"
	"github.com/kunobi-ninja/kobe/internal/cmd/secrets"
	"github.com/kunobi-ninja/kobe/internal/config"
)

type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string            `json:"image"`
	Build       map[string]string `json:"build"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Ports       []string          `json:"ports"`
	DependsOn   map[string]any    `json:"depends_on"`
	Volumes     []string          `json:"volumes"`
}

// dependsOn accepts both the list and the map form of depends_on.
func (s *composeService) UnmarshalJSON(b []byte) error {
	type plain composeService
	var raw struct {
		plain
		DependsOn any `json:"depends_on"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = composeService(raw.plain)
	s.DependsOn = map[string]any{}
	switch d := raw.DependsOn.(type) {
	case []any:
		for _, n := range d {
			s.DependsOn[n.(string)] = nil
		}
	case map[string]any:
		s.DependsOn = d
	}
	return nil
}

// TestComposeMatchesTheBinary parses docker-compose.yaml (no Docker engine runs here) and runs
// each kobe service's command and environment through the real command's flag parsing and
// validation, then checks that addresses point at services and ports that exist.
func TestComposeMatchesTheBinary(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docker-compose.yaml"))
	require.NoError(t, err)
	var cf composeFile
	require.NoError(t, yaml.Unmarshal(data, &cf))

	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "kobe-migrate", "kobe-secrets", "kobe-server", "kobe-worker"} {
		require.Contains(t, cf.Services, name)
	}
	for name, svc := range cf.Services {
		for dep := range svc.DependsOn {
			assert.Contains(t, cf.Services, dep, "%s depends on an unknown service", name)
		}
		for _, v := range svc.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, "./") {
				_, err := os.Stat(filepath.Join("..", "..", "..", src))
				assert.NoError(t, err, "%s mounts a missing path", name)
			} else {
				assert.Contains(t, cf.Volumes, src, "%s uses an undeclared volume", name)
			}
		}
	}
	require.Contains(t, cf.Services["temporal"].Ports[0], ":7233", "Temporal's gRPC port is published")
	assert.Equal(t, "temporal:7233", cf.Services["temporal-ui"].Environment["TEMPORAL_ADDRESS"])
	_, err = os.Stat(filepath.Join("..", "..", "..", cf.Services["kobe-migrate"].Build["dockerfile"]))
	require.NoError(t, err, "the Dockerfile the compose file builds exists")

	// The schema is migrated, by the same image, before the server and the worker start on it.
	migrateSvc := cf.Services["kobe-migrate"]
	require.Equal(t, []string{"migrate", "up"}, migrateSvc.Command)
	assert.Equal(t, cf.Services["kobe-server"].Image, migrateSvc.Image)
	for k, v := range migrateSvc.Environment {
		t.Setenv(k, v)
	}
	var up *migrate.UpOptions
	ios, _, _, _ := iostreams.Test()
	require.NoError(t, cmdtest.Run(migrate.NewCmdUp(&factory.Factory{IOStreams: ios},
		func(o *migrate.UpOptions) error { up = o; return nil })))
	// The key file is made once, on the volume the server and the worker mount.
	secretsSvc := cf.Services["kobe-secrets"]
	require.Equal(t, []string{"secrets", "init"}, secretsSvc.Command)
	for k, v := range secretsSvc.Environment {
		t.Setenv(k, v)
	}
	var keyInit *secrets.InitOptions
	require.NoError(t, cmdtest.Run(secrets.NewCmdInit(&factory.Factory{IOStreams: ios},
		func(o *secrets.InitOptions) error { keyInit = o; return nil })))
	for _, name := range []string{"kobe-server", "kobe-worker"} {
		assert.Equal(t, keyInit.KeyFile, cf.Services[name].Environment["KOBE_SECRET_KEY_FILE"], "%s uses the key file kobe-secrets makes", name)
		assert.Equal(t, secretsSvc.Volumes, cf.Services[name].Volumes, "%s mounts the volume of the key file", name)
		assert.Equal(t, map[string]any{"condition": "service_completed_successfully"}, cf.Services[name].DependsOn["kobe-secrets"],
			"%s starts once the key file exists", name)
	}
	for _, name := range []string{"kobe-server", "kobe-worker"} {
		assert.Equal(t, cf.Services[name].Environment["KOBE_STORE"], up.Store, "%s uses the store kobe-migrate migrates", name)
		assert.Equal(t, map[string]any{"condition": "service_completed_successfully"}, cf.Services[name].DependsOn["kobe-migrate"],
			"%s starts once the schema is migrated", name)
	}

	modes := map[string]config.Mode{"server": config.ModeServer, "worker": config.ModeWorker}
	for _, name := range []string{"kobe-server", "kobe-worker"} {
		t.Run(name, func(t *testing.T) {
			svc := cf.Services[name]
			require.NotEmpty(t, svc.Command)
			mode, ok := modes[svc.Command[0]]
			require.True(t, ok, "unknown kobe subcommand %q", svc.Command[0])
			for k, v := range svc.Environment {
				require.True(t, strings.HasPrefix(k, "KOBE_"), "%s: non-kobe variable %s", name, k)
				t.Setenv(k, v)
			}

			io, _, _, _ := iostreams.Test()
			var got *Options
			runF := func(o *Options) error { got = o; return nil }
			var cmd *cobra.Command
			if mode == config.ModeServer {
				cmd = NewCmdServer(&factory.Factory{IOStreams: io}, runF)
			} else {
				cmd = NewCmdWorker(&factory.Factory{IOStreams: io}, runF)
			}
			// Every KOBE_* variable must name a real flag of this command.
			for k := range svc.Environment {
				flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "KOBE_"), "_", "-"))
				assert.NotNil(t, cmd.Flags().Lookup(flag), "%s: %s matches no flag of kobe %s", name, k, svc.Command[0])
			}
			cmd.SetArgs(svc.Command[1:])
			require.NoError(t, cmd.Execute(), "the command line and environment parse and validate")
			require.NotNil(t, got)

			// Temporal and the store point at compose services on the right ports.
			host, port, err := net.SplitHostPort(got.Config.Temporal.Address)
			require.NoError(t, err)
			assert.Contains(t, cf.Services, host)
			assert.Equal(t, "7233", port)
			u, err := url.Parse(got.Config.Store)
			require.NoError(t, err)
			assert.Equal(t, "postgresql", u.Hostname())
			assert.Equal(t, "/kobe", u.Path, "kobe uses its own database, created by deploy/compose/initdb")

			listen := got.Config.APIAddress
			if mode == config.ModeWorker {
				listen = got.Config.MetricsAddress
			}
			lhost, lport, err := net.SplitHostPort(listen)
			require.NoError(t, err)
			assert.Equal(t, "0.0.0.0", lhost, "a container must listen on all interfaces")
			published := false
			for _, p := range svc.Ports {
				if strings.HasSuffix(p, ":"+lport) {
					published = true
				}
			}
			assert.True(t, published, "%s: port %s is not published", name, lport)
		})
	}
}
