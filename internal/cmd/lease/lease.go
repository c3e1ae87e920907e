// Package lease implements `kobe lease`: create, list, get, extend, release and kubeconfig.
package lease

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// NewCmdLease returns `kobe lease` and its subcommands.
func NewCmdLease(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease <command>",
		Short: "Lease clusters from pools: create, list, get, extend, release, kubeconfig",
		Long: `A lease is one cluster of a pool, yours until you release it or its TTL ends. A new lease is
Pending until the pool hands it a warm cluster (at once when one is Ready, else in queue
order), then Bound with a kubeconfig; it ends Released, Expired or Failed (with a reason
such as pool_exhausted).`,
		Example: `  kobe lease create ci --ttl 1h --wait --kubeconfig ./kubeconfig
  kobe lease list
  kobe lease extend lease-1a2b3c --ttl 30m
  kobe lease release lease-1a2b3c`,
	}
	cmd.AddCommand(
		NewCmdCreate(f, nil),
		NewCmdList(f, nil),
		NewCmdGet(f, nil),
		NewCmdExtend(f, nil),
		NewCmdRelease(f, nil),
		NewCmdSleep(f, nil),
		NewCmdWake(f, nil),
		NewCmdKubeconfig(f, nil),
	)
	return cmd
}

// printTable writes leases as a table.
func printTable(w io.Writer, leases []api.Lease, tty bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPOOL\tPHASE\tEXPIRES\tEXTENDED\tDETAIL")
	for _, l := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", l.ID, dash(l.Alias), poolOf(l), l.Phase,
			cmdutil.FormatTime(l.ExpiresAt, tty, now), l.Extensions, detail(l))
	}
	return tw.Flush()
}

// describe writes one lease as "Field: value" lines.
func describe(w io.Writer, l api.Lease, tty bool, now time.Time, kubeconfigNote string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("ID", l.ID)
	row("Name", l.Alias)
	row("Pool", poolOf(l))
	phase := string(l.Phase)
	switch {
	case l.Phase == api.LeasePending:
		phase += " (" + cmdutil.Waiting(l) + ")"
	case l.Reason != "":
		phase += " (reason " + string(l.Reason) + ")"
	}
	row("Phase", phase)
	if l.ClusterName != "" || l.Endpoint != "" {
		row("Cluster", strings.TrimSpace(l.ClusterName+" "+paren(l.Endpoint)))
	}
	row("TTL", l.EffectiveTTL)
	row("Created", cmdutil.FormatTime(nonZero(l.CreatedAt), tty, now))
	if l.BoundAt != nil {
		row("Bound", cmdutil.FormatTime(l.BoundAt, tty, now))
	}
	if l.ExpiresAt != nil {
		exp := cmdutil.FormatTime(l.ExpiresAt, tty, now)
		if tty {
			exp += " (" + l.ExpiresAt.Local().Format("15:04:05") + ")"
		}
		row("Expires", exp)
	}
	if l.Extensions > 0 {
		row("Extended", fmt.Sprintf("%d time%s", l.Extensions, plural(l.Extensions)))
	}
	row("Owner", l.Owner)
	if len(l.Metadata) > 0 {
		var kv []string
		for _, k := range cmdutil.SortedKeys(l.Metadata) {
			kv = append(kv, k+"="+l.Metadata[k])
		}
		row("Metadata", strings.Join(kv, ", "))
	}
	for _, c := range l.Conditions {
		// A condition that is not True is what the holder needs to see: "InstanceHealthy=False".
		v := c.Type + "=" + c.Status
		if c.Reason != "" {
			v += " (" + string(c.Reason) + ")"
		}
		if c.Message != "" {
			v += ": " + c.Message
		}
		if !c.LastTransitionTime.IsZero() {
			t := c.LastTransitionTime
			v += ", since " + cmdutil.FormatTime(&t, tty, now)
		}
		row("Condition", v)
	}
	if kubeconfigNote == "" && l.Phase == api.LeaseBound {
		kubeconfigNote = "kobe lease kubeconfig " + l.ID
	}
	row("Kubeconfig", kubeconfigNote)
	return tw.Flush()
}

func poolOf(l api.Lease) string {
	if l.Pool != "" {
		return l.Pool
	}
	return l.Profile
}

func detail(l api.Lease) string {
	switch {
	case l.Phase == api.LeasePending && l.QueuePosition > 0:
		return fmt.Sprintf("queued #%d", l.QueuePosition)
	case l.Reason != "":
		return string(l.Reason)
	case l.ClusterName != "":
		return "cluster " + l.ClusterName
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
