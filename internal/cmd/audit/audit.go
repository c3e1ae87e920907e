// Package audit implements `kobe audit`: the append-only log of what was done, by whom.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
)

// Options of `kobe audit`.
type Options struct {
	Factory *factory.Factory
	Query   api.AuditQuery
	Output  *output.Format
}

// NewCmdAudit builds `kobe audit`; runF replaces the behaviour in tests.
func NewCmdAudit(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: who did what, when, with what result",
		Long: `Show audit events, oldest first: every lease, pool and token operation, with its actor, target
and result. The log is append-only in kobe's store. Page through it with --after (the ID of the
last event shown) and --limit.`,
		Example: `  kobe audit --since 1h
  kobe audit --since 2025-06-01T00:00:00Z --pool ci --action lease.created
  kobe audit --actor alice --limit 20 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if s := opts.Query.Since; s != "" {
				if err := checkSince(s); err != nil {
					return err
				}
			}
			if opts.Query.Limit < 0 {
				return fmt.Errorf("--limit %d: must be positive", opts.Query.Limit)
			}
			if opts.Query.After < 0 {
				return fmt.Errorf("--after %d: must be an event id", opts.Query.After)
			}
			if runF != nil {
				return runF(opts)
			}
			return auditRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Query.Since, "since", "", "events since a duration ago (1h) or an RFC 3339 time")
	cmd.Flags().StringVar(&opts.Query.Actor, "actor", "", "only events by this principal")
	cmd.Flags().StringVar(&opts.Query.Pool, "pool", "", "only events about this pool")
	cmd.Flags().StringVar(&opts.Query.Action, "action", "", "only this action, e.g. lease.created")
	cmd.Flags().Int64Var(&opts.Query.After, "after", 0, "only events after this event id (paging)")
	cmd.Flags().IntVar(&opts.Query.Limit, "limit", 0, "at most this many events (default: the server's)")
	opts.Output = output.AddFlag(cmd)
	return cmd
}

// checkSince accepts a positive duration or an RFC 3339 time.
func checkSince(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return fmt.Errorf("--since %s: must be a positive duration (1h) or an RFC 3339 time", s)
		}
		return nil
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return fmt.Errorf("--since %q: want a duration such as 1h or an RFC 3339 time such as 2025-06-01T00:00:00Z", s)
	}
	return nil
}

func auditRun(ctx context.Context, opts *Options) error {
	ios := opts.Factory.IOStreams
	c, err := opts.Factory.APIClient()
	if err != nil {
		return err
	}
	evs, err := c.ListAudit(ctx, opts.Query)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []api.AuditEvent{}
	}
	return opts.Output.Print(ios.Out, api.AuditList{Items: evs}, func(w io.Writer) error {
		if len(evs) == 0 {
			if ios.IsStdoutTTY() {
				fmt.Fprintln(ios.ErrOut, "no audit events match")
			}
			return nil
		}
		tty := ios.IsStdoutTTY()
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIME\tACTOR\tACTION\tTARGET\tRESULT\tDETAIL")
		for _, e := range evs {
			when := e.Time.UTC().Format(time.RFC3339)
			if tty {
				when = e.Time.Local().Format("2006-01-02 15:04:05")
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, when, e.Actor, e.Action, e.Target, e.Result, detail(e.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if tty && opts.Query.Limit > 0 && len(evs) == opts.Query.Limit {
			fmt.Fprintf(ios.ErrOut, "more may follow: --after %d\n", evs[len(evs)-1].ID)
		}
		return nil
	})
}

// detail renders an event's detail compactly: k=v pairs, sorted.
func detail(d map[string]any) string {
	if len(d) == 0 {
		return ""
	}
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	strs := map[string]string{}
	for _, k := range keys {
		switch v := d[k].(type) {
		case string:
			strs[k] = v
		default:
			b, _ := json.Marshal(v)
			strs[k] = string(b)
		}
	}
	var parts []string
	for _, k := range cmdutil.SortedKeys(strs) {
		parts = append(parts, k+"="+strs[k])
	}
	return strings.Join(parts, " ")
}
