// Package status implements `kobe status`.
package status

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// Options of `kobe status`.
type Options struct {
	Factory *factory.Factory
	Output  *output.Format
}

// NewCmdStatus builds the command; runF replaces the behaviour in tests.
func NewCmdStatus(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the health of a kobe server: version, Temporal, store, workers, backends",
		Example: `  kobe status
  kobe status -o json
  kobe status --context prod
  kobe status --server http://kobe.internal:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	opts.Output = output.AddFlag(cmd)
	return cmd
}

func statusRun(ctx context.Context, opts *Options) error {
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	out := opts.Factory.IOStreams.Out
	if !opts.Output.Is(output.Table) {
		return opts.Output.Print(out, st, nil)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Server\t%s\t%s\n", c.BaseURL, st.Version)
	fmt.Fprintf(tw, "Temporal\t%s\t%s\n", health(st.Temporal.Healthy, st.Temporal.LatencyMs, st.Temporal.Error),
		fmt.Sprintf("%s namespace %s, task queue %s", st.Temporal.Address, st.Temporal.Namespace, st.Temporal.TaskQueue))
	fmt.Fprintf(tw, "Store\t%s\t%s schema v%d\n", health(st.Store.Healthy, st.Store.LatencyMs, st.Store.Error), st.Store.Driver, st.Store.SchemaVersion)
	workers := "none polling — start `kobe worker` (leases will not progress)"
	if len(st.Workers) > 0 {
		var ids []string
		for _, w := range st.Workers {
			ids = append(ids, w.Identity)
		}
		workers = fmt.Sprintf("%d: %s", len(st.Workers), strings.Join(ids, ", "))
	}
	fmt.Fprintf(tw, "Workers\t%s\t\n", workers)
	backends := "none compiled in"
	if len(st.Backends) > 0 {
		backends = strings.Join(st.Backends, ", ")
	}
	fmt.Fprintf(tw, "Backends\t%s\t\n", backends)
	fmt.Fprintf(tw, "Auth\t%s\t\n", authLine(st.Auth))
	if len(st.Auth.Sessions) > 0 {
		// The server lists only the pools of the caller's role.
		fmt.Fprintf(tw, "Pools\t%d you may use\t\n", len(st.Pools))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !st.Temporal.Healthy || !st.Store.Healthy {
		return fmt.Errorf("kobe at %s is not healthy", c.BaseURL)
	}
	return nil
}

// authLine says how the server authenticates and who this CLI is to it.
func authLine(a api.AuthInfo) string {
	line := strings.Join(a.Methods, ", ")
	if len(a.Sessions) == 0 {
		return line + "; no token sent (kobe dev writes one, or kobe token create)"
	}
	s := a.Sessions[0]
	line += fmt.Sprintf("; you are %s (role %s", s.Principal, s.Role)
	if s.TokenName != "" {
		line += ", token " + s.TokenName
	}
	if s.Issuer != "" {
		line += ", OIDC token of " + s.Issuer
	}
	if s.ExpiresAt != nil {
		line += ", expires " + s.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return line + ")"
}

func health(ok bool, latencyMs float64, errMsg string) string {
	if ok {
		return fmt.Sprintf("ok (%.1f ms)", latencyMs)
	}
	return "FAILING: " + errMsg
}
