// Package doctor implements `kobe doctor`.
package doctor

import (
	"context"
	"errors"
	"fmt"
	stdio "io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// Options of `kobe doctor`.
type Options struct {
	Factory *factory.Factory
	Hold    time.Duration
	Timeout time.Duration
	ID      string
	Output  *output.Format
	// Poll is the pause between retries when the API is unreachable (tests shorten it).
	Poll time.Duration
}

// NewCmdDoctor builds the command; runF replaces the behaviour in tests.
func NewCmdDoctor(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f, Poll: time.Second}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the whole chain: CLI → API → Temporal → worker → store, with each hop's latency",
		Long: `Start a diagnostic workflow through the API and report every hop it crosses:
the API, Temporal, a worker running an activity, the store written by the worker and read
back by the API. It also reads the Temporal settings kobe's bind depends on (task-queue
partitions, Updates on and in flight per workflow, eager start, search attributes, retention;
docs/deploy.md, "Temporal") and warns, naming the setting, about one that slows or breaks the
bind; a warning does not fail the run. With --hold the workflow waits in a durable timer between two probes: kill
and restart any kobe process meanwhile and the run still completes (the CLI keeps waiting,
or pick it up again later with --id).`,
		Example: `  kobe doctor
  kobe doctor --hold 30s
  kobe doctor --id doctor-1a2b3c4d5e6f7a8b
  kobe doctor -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Hold < 0 || opts.Hold > api.MaxDoctorHold {
				return fmt.Errorf("--hold %s: must be between 0s and %s", opts.Hold, api.MaxDoctorHold)
			}
			if opts.ID != "" && cmd.Flags().Changed("hold") {
				return errors.New("--hold and --id cannot be used together: --id follows a run that was already started")
			}
			if opts.Timeout == 0 {
				opts.Timeout = opts.Hold + 2*time.Minute
			}
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Hold, "hold", 0, "wait this long in a durable timer between two probes (e.g. 30s)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "give up after this long (default: hold + 2m)")
	cmd.Flags().StringVar(&opts.ID, "id", "", "follow an existing doctor run instead of starting one")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

// Result is what `kobe doctor -o json` prints.
type Result struct {
	ID     string    `json:"id"`
	Status string    `json:"status"`
	Error  string    `json:"error,omitempty"`
	Hops   []api.Hop `json:"hops"`
	// Temporal lists the Temporal settings the bind depends on (not with --id: they are read
	// when a run starts).
	Temporal []api.TemporalSetting `json:"temporal,omitempty"`
}

func doctorRun(ctx context.Context, opts *Options) error {
	io := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	res := Result{ID: opts.ID}
	rtt, err := c.Healthz(ctx)
	if err != nil {
		return err
	}
	res.Hops = append(res.Hops, api.Hop{Name: "cli → api", OK: true, LatencyMs: msOf(rtt), Detail: c.BaseURL})

	if res.ID == "" {
		req := api.DoctorRequest{TemporalSettings: true}
		if opts.Hold > 0 {
			req.Hold = opts.Hold.String()
		}
		started, err := c.StartDoctorRequest(ctx, req)
		if err != nil {
			return err
		}
		res.ID, res.Temporal = started.ID, started.Temporal
		res.Hops = append(res.Hops, api.Hop{Name: "api → temporal: start workflow", OK: true, LatencyMs: started.StartMs})
		fmt.Fprintf(io.ErrOut, "started %s\n", res.ID)
		// A setting that slows or breaks the bind is a warning, not a failure: the chain works.
		for _, setting := range res.Temporal {
			if !setting.OK {
				fmt.Fprintf(io.ErrOut, "warning: Temporal setting %s = %s: %s\n", setting.Name, setting.Value, setting.Detail)
			}
		}
	}

	report, err := waitForReport(ctx, c, res.ID, opts)
	if err != nil {
		return fmt.Errorf("doctor run %s: %w (follow it later with: kobe doctor --id %s)", res.ID, err, res.ID)
	}
	res.Status, res.Error = report.Status, report.Error
	res.Hops = append(res.Hops, report.Hops...)

	if err := opts.Output.Print(io.Out, res, func(w stdio.Writer) error {
		printTable(w, res, report.TotalMs)
		return nil
	}); err != nil {
		return err
	}
	if res.Status != "Completed" {
		return fmt.Errorf("doctor run %s %s: %s", res.ID, strings.ToLower(res.Status), res.Error)
	}
	for _, h := range res.Hops {
		if !h.OK {
			return fmt.Errorf("doctor run %s: hop %q failed: %s", res.ID, h.Name, h.Detail)
		}
	}
	return nil
}

// waitForReport long-polls until the run finishes. An unreachable API is retried: during a
// --hold the operator may be restarting kobe on purpose.
func waitForReport(ctx context.Context, c *api.Client, id string, opts *Options) (api.DoctorReport, error) {
	io := opts.Factory.IOStreams
	lastStage := ""
	for {
		// Ask once without waiting so that the stage (e.g. holding) shows at once, then long-poll.
		wait := 20 * time.Second
		if lastStage == "" {
			wait = 0
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait+time.Second {
			wait = max(time.Until(dl)-time.Second, 0)
		}
		report, err := c.GetDoctor(ctx, id, wait)
		if err != nil {
			var apiErr *api.Error
			if errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
				return report, err
			}
			if ctx.Err() != nil {
				return report, fmt.Errorf("gave up after --timeout %s: %v", opts.Timeout, err)
			}
			if lastStage != "unreachable" {
				fmt.Fprintf(io.ErrOut, "API unreachable, retrying: %v\n", err)
				lastStage = "unreachable"
			}
			select {
			case <-ctx.Done():
			case <-time.After(opts.Poll):
			}
			continue
		}
		if report.Status != "Running" {
			return report, nil
		}
		stage := report.Stage
		if stage == "holding" && !report.HoldUntil.IsZero() {
			stage = fmt.Sprintf("holding in a durable timer until %s", report.HoldUntil.Local().Format("15:04:05"))
		}
		if stage != lastStage && stage != "" {
			fmt.Fprintf(io.ErrOut, "%s: %s\n", id, stage)
			lastStage = stage
		}
		if ctx.Err() != nil {
			return report, fmt.Errorf("still running after --timeout %s", opts.Timeout)
		}
	}
}

func printTable(w interface{ Write([]byte) (int, error) }, res Result, totalMs float64) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "HOP\tRESULT\tLATENCY\tDETAIL\n")
	for _, h := range res.Hops {
		result := "ok"
		if !h.OK {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.Name, result, fmtMs(h.LatencyMs), h.Detail)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%s: %s (workflow ran %s)\n", res.ID, res.Status, fmtMs(totalMs))
	if len(res.Temporal) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TEMPORAL SETTING\tRESULT\tVALUE\n")
	for _, s := range res.Temporal {
		result := "ok"
		if !s.OK {
			result = "WARN"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, result, s.Value)
	}
	_ = tw.Flush()
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fmtMs(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}
