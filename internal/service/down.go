package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease/leasestart"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// downActor names `kobe dev --down` in the audit log.
const downActor = "kobe-dev-down"

// DownPoll is how often Down looks at what is left.
var DownPoll = time.Second

// KeepsRunning says what of this dev state dir outlives the process: the clusters kobe holds
// (rows of its store). Empty when there are none or they do not outlive it (--ephemeral).
func (p *Process) KeepsRunning(ctx context.Context) string {
	if p.Store == nil || p.StateDir == "" {
		return ""
	}
	ins, err := p.Store.ListInstances(ctx, store.InstanceFilter{})
	if err != nil || len(ins) == 0 {
		return ""
	}
	kind := "local cluster"
	for _, in := range ins {
		if in.Backend != "local" {
			kind = "cluster"
		}
	}
	if len(ins) == 1 {
		return fmt.Sprintf("1 %s keeps running and is re-adopted at the next start; `kobe dev --down` deletes it", kind)
	}
	return fmt.Sprintf("%d %ss keep running and are re-adopted at the next start; `kobe dev --down` deletes them", len(ins), kind)
}

// Down deletes every cluster this process's store holds, through the same durable path as a
// user's `kobe lease release` and `kobe pool delete`: every lease still Pending or Bound is
// released (its cluster would otherwise wait for the lease's TTL), then every pool is deleted,
// which drains it — its members are torn down by their teardown workflows, verified gone and
// their store rows removed — and the pool workflow ends. Down waits for all of it, printing
// progress to out. It returns an error naming whatever could not be deleted.
func (p *Process) Down(ctx context.Context, out io.Writer) error {
	if p.Temporal == nil || p.Store == nil {
		return errors.New("kobe dev --down: nothing started")
	}
	if len(p.backends) == 0 {
		return errors.New("kobe dev --down needs the worker of this process (drop --no-worker)")
	}
	st, c := p.Store, p.Temporal

	leases, err := st.ListLeases(ctx, store.LeaseFilter{Phases: api.ActiveLeasePhases})
	if err != nil {
		return fmt.Errorf("listing leases: %w", err)
	}
	for _, l := range leases {
		err := c.SignalWorkflow(ctx, leasestart.WorkflowID(l.ID), "", lease.SignalReleaseLease, nil)
		if err != nil && !notFound(err) {
			return fmt.Errorf("releasing lease %s: %w", l.ID, err)
		}
		if err := p.auditDown(ctx, "lease.release", l.ID, l.Pool, "ok"); err != nil {
			return err
		}
		fmt.Fprintf(out, "released lease %s (pool %s, %s, owner %s)\n", l.ID, l.Pool, l.Phase, l.Principal)
	}

	pools, err := st.ListPools(ctx)
	if err != nil {
		return fmt.Errorf("listing pools: %w", err)
	}
	before, err := st.ListInstances(ctx, store.InstanceFilter{})
	if err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	for _, pl := range pools {
		err := c.SignalWorkflow(ctx, pool.WorkflowID(pl.Name), "", pool.SignalDeletePool, nil)
		result := "draining"
		if notFound(err) {
			// No workflow holds members: forget the pool at once, as DELETE /v1/pools does.
			if err := st.DeletePool(ctx, pl.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("deleting pool %s: %w", pl.Name, err)
			}
			result = "deleted"
		} else if err != nil {
			return fmt.Errorf("deleting pool %s: %w", pl.Name, err)
		}
		if err := p.auditDown(ctx, "pool.delete", pl.Name, pl.Name, result); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleting pool %s\n", pl.Name)
	}

	// Wait until every pool workflow has ended and its row is gone, reporting each pool's
	// remaining clusters as they go.
	left := map[string]string{} // pool → last progress line
	for _, pl := range pools {
		left[pl.Name] = ""
	}
	for len(left) > 0 {
		for _, name := range sortedKeys(left) {
			done, line, err := p.poolGone(ctx, name)
			if err != nil {
				return err
			}
			if done {
				fmt.Fprintf(out, "pool %s: deleted\n", name)
				delete(left, name)
				continue
			}
			if line != left[name] {
				fmt.Fprintf(out, "pool %s: %s\n", name, line)
				left[name] = line
			}
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting for pool(s) %s: %w", strings.Join(sortedKeys(left), ", "), ctx.Err())
		case <-time.After(DownPoll):
		}
	}

	// Verify: no store row and no instance the backends still hold.
	var failed []string
	rest, err := st.ListInstances(ctx, store.InstanceFilter{})
	if err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	for _, in := range rest {
		failed = append(failed, fmt.Sprintf("cluster %s (pool %s, %s)", in.ID, in.Pool, in.Phase))
	}
	for name, b := range p.backends {
		lister, ok := b.(interface{ InstanceIDs() []string })
		if !ok {
			continue
		}
		for _, id := range lister.InstanceIDs() {
			if !hasInstance(rest, id) {
				failed = append(failed, fmt.Sprintf("cluster %s (backend %s: still present, no store row)", id, name))
			}
		}
	}
	sort.Strings(failed)
	fmt.Fprintf(out, "deleted %d cluster(s) of %d pool(s), released %d lease(s)\n", len(before)-len(rest), len(pools), len(leases))
	if len(failed) > 0 {
		return fmt.Errorf("could not delete %d cluster(s): %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// poolGone reports whether a deleted pool is fully gone (workflow ended, row removed), else a
// line saying what is left.
func (p *Process) poolGone(ctx context.Context, name string) (bool, string, error) {
	running := false
	d, err := p.Temporal.DescribeWorkflowExecution(ctx, pool.WorkflowID(name), "")
	switch {
	case notFound(err):
	case err != nil:
		return false, "", fmt.Errorf("pool %s: %w", name, err)
	default:
		running = d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	_, err = p.Store.GetPool(ctx, name)
	rowGone := errors.Is(err, store.ErrNotFound)
	if err != nil && !rowGone {
		return false, "", fmt.Errorf("pool %s: %w", name, err)
	}
	if !running && !rowGone {
		// The workflow ended without forgetting the pool (e.g. it failed): nothing will.
		return false, "", fmt.Errorf("pool %s: its workflow ended but the pool is still recorded", name)
	}
	if !running && rowGone {
		return true, "", nil
	}
	ins, err := p.Store.ListInstances(ctx, store.InstanceFilter{Pool: name})
	if err != nil {
		return false, "", fmt.Errorf("pool %s: %w", name, err)
	}
	phases := map[string]int{}
	for _, in := range ins {
		phases[string(in.Phase)]++
	}
	var parts []string
	for _, ph := range sortedKeys(phases) {
		parts = append(parts, fmt.Sprintf("%d %s", phases[ph], ph))
	}
	if len(parts) == 0 {
		return false, "draining", nil
	}
	return false, fmt.Sprintf("draining, %d cluster(s) left (%s)", len(ins), strings.Join(parts, ", ")), nil
}

func (p *Process) auditDown(ctx context.Context, action, target, pool, result string) error {
	detail, _ := json.Marshal(map[string]string{"by": "kobe dev --down"})
	if _, err := p.Store.AppendEvent(ctx, store.Event{Actor: downActor, Action: action, Target: target, Pool: pool,
		Result: result, Detail: detail}); err != nil {
		return fmt.Errorf("audit of %s %s: %w", action, target, err)
	}
	return nil
}

func notFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func hasInstance(ins []store.Instance, id string) bool {
	for _, in := range ins {
		if in.ID == id {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
