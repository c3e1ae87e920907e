package helm_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/cmd/serve"
)

// The command line and environment of every API and worker container the chart renders, in every
// value set, go through kobe's own flag parsing and validation (the `kobe server` and `kobe
// worker` commands, with a run function that only keeps the result): every flag exists, every
// KOBE_* variable names one, the values validate, and they say what the values asked for. The
// files the pods mount (/etc/kobe/…) are stood in for by empty files of a temporary directory.
func TestRenderedCommandLinesAreKobes(t *testing.T) {
	for name, values := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, values)
			for _, d := range r.ofKind("Deployment") {
				c := containers(podSpec(t, d))[0]
				got := parseCommandLine(t, d.GetName(), c)
				temporal, _, _ := unstructured.NestedString(values, "temporal", "address")
				if got.Config.Temporal.Address != temporal {
					t.Errorf("%s: Temporal at %q, want %q", d.GetName(), got.Config.Temporal.Address, temporal)
				}
				if !strings.HasPrefix(got.Config.Store, "postgres://") {
					t.Errorf("%s: store %q", d.GetName(), got.Config.Store)
				}
				if got.Config.LogFormat != "json" {
					t.Errorf("%s: log format %q", d.GetName(), got.Config.LogFormat)
				}
				if got.Config.SecretKeyFile == "" {
					t.Errorf("%s: no sealing key", d.GetName())
				}
			}
		})
	}
}

// parseCommandLine runs a container's args and environment through the kobe command its first
// argument names and returns what the command would have run with.
func parseCommandLine(t *testing.T, what string, c map[string]any) *serve.Options {
	t.Helper()
	files := t.TempDir()
	var cmdArgs []string
	for _, a := range args(t, c) {
		// A file the pod mounts becomes a file of the same name here, holding one line (an
		// API key file must not be empty; the others are only checked to exist).
		if flag, path, ok := strings.Cut(a, "="); ok && strings.HasPrefix(path, "/etc/kobe/") {
			local := filepath.Join(files, path)
			if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(local, []byte("stand-in\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			a = flag + "=" + local
		}
		cmdArgs = append(cmdArgs, a)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	var names []string
	for _, e := range env {
		e := e.(map[string]any)
		name := e["name"].(string)
		names = append(names, name)
		value, literal := e["value"].(string)
		if !literal {
			// From a Secret: the store's DSN is the only one.
			value = "postgres://kobe:secret@postgres.db.svc:5432/kobe"
		}
		t.Setenv(name, value)
	}
	sort.Strings(names)

	io, _, _, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: io}
	var got *serve.Options
	keep := func(o *serve.Options) error { got = o; return nil }
	var cmd *cobra.Command
	switch cmdArgs[0] {
	case "server":
		cmd = serve.NewCmdServer(f, keep)
	case "worker":
		cmd = serve.NewCmdWorker(f, keep)
	default:
		t.Fatalf("%s runs kobe %q", what, cmdArgs[0])
	}
	for _, name := range names {
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "KOBE_"), "_", "-"))
		if !strings.HasPrefix(name, "KOBE_") || cmd.Flags().Lookup(flag) == nil {
			t.Errorf("%s: %s names no flag of kobe %s", what, name, cmdArgs[0])
		}
	}
	cmd.SetArgs(cmdArgs[1:])
	cmd.SetOut(io.Out)
	cmd.SetErr(io.ErrOut)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%s: kobe %s refuses %q: %v", what, cmdArgs[0], cmdArgs[1:], err)
	}
	if got == nil {
		t.Fatalf("%s: kobe %s did not run", what, cmdArgs[0])
	}
	return got
}
