// Package instance is the life of one cluster instance: Provision (create through the
// backend, wait until ready, apply the pool's addons, pass its readiness gates, record it) and
// Teardown (delete, verify, forget), the backend calls and health checks they and the pool run
// as activities, and the Preflight of a pool's spec. Provision and Teardown report to the pool
// that started them with the signals in contract.go; the pool imports this package, never the
// reverse.
package instance

import (
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/poolspec"
	"go.temporal.io/sdk/workflow"
)

// Workflow names.
const (
	ProvisionWorkflowName = "Provision"
	TeardownWorkflowName  = "Teardown"
)

// WorkflowID is the workflow id of an instance's provisioning.
func WorkflowID(instanceID string) string { return "instance-" + instanceID }

// ProvisionInput asks for one instance.
type ProvisionInput struct {
	Backend string                `json:"backend"`
	Spec    backends.InstanceSpec `json:"spec"`
	// CreatingTimeout bounds create → ready (default 10m).
	CreatingTimeout time.Duration `json:"creatingTimeout,omitempty"`
	// NotifyPool is the workflow id of the pool to signal with the outcome (member-ready or
	// member-failed); empty for a standalone provision.
	NotifyPool string `json:"notifyPool,omitempty"`
	// Addons are applied, in order, once the instance is ready; then every gate must pass
	// within GatesTimeout (default 5m) before the instance is recorded Ready.
	Addons       []poolspec.Addon         `json:"addons,omitempty"`
	Gates        []poolspec.ReadinessGate `json:"gates,omitempty"`
	GatesTimeout time.Duration            `json:"gatesTimeout,omitempty"`
	// HostCluster is the pool's spec.backend.hostCluster: the instance is placed by a worker of
	// that host cluster ("": any worker running the backend).
	HostCluster string `json:"hostCluster,omitempty"`
}

// ProvisionResult is a ready instance and where it lives.
type ProvisionResult struct {
	Status    backends.InstanceStatus `json:"status"`
	Placement HostAssignment          `json:"placement"`
	// Prepared: the instance's lease credential is prepared (PrepareLeaseCredentials).
	Prepared bool `json:"prepared,omitempty"`
}

// Provision creates an instance, waits until it is ready, applies the pool's addons and waits
// until it passes the pool's readiness gates; it records each step in the store.
// On any failure it deletes what it created before returning the error: an instance is either
// ready and recorded, or gone — never half-made and forgotten.
func Provision(ctx workflow.Context, in ProvisionInput) (ProvisionResult, error) {
	started := workflow.Now(ctx)
	res, err := provision(ctx, in)
	outcome := "success"
	if err != nil {
		outcome = "failure"
	}
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": in.Spec.Pool, "backend": in.Backend, "outcome": outcome})
	m.Timer(MetricInstanceCreateDuration).Record(workflow.Now(ctx).Sub(started))
	m.Counter(MetricInstanceCreates).Inc(1)
	if in.NotifyPool != "" {
		report := MemberReport{InstanceID: in.Spec.ID, Placement: res.Placement, Endpoint: res.Status.Endpoint, Prepared: res.Prepared}
		signal := SignalMemberReady
		if err != nil {
			signal, report.Reason = SignalMemberFail, err.Error()
		}
		notifyPool(ctx, in.NotifyPool, signal, report)
	}
	return res, err
}

// HostClusterWait bounds how long a Provision waits for a worker of its pool's host cluster to
// take the placement.
const HostClusterWait = time.Minute

// notifyPool tells the pool entity how a member workflow ended. It goes through a disconnected
// context so that a cancelled member still reports.
func notifyPool(ctx workflow.Context, poolWorkflowID, signal string, report MemberReport) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, poolWorkflowID, "", signal, report).Get(dctx, nil)
}

func provision(ctx workflow.Context, in ProvisionInput) (ProvisionResult, error) {
	var a *Activities
	if in.CreatingTimeout <= 0 {
		in.CreatingTimeout = 10 * time.Minute
	}
	short := workflow.WithActivityOptions(ctx, StoreWriteOptions())
	var res ProvisionResult
	if in.HostCluster != "" {
		opts := StoreWriteOptions()
		opts.TaskQueue = HostQueue(workflow.GetInfo(ctx).TaskQueueName, HostClusterID(in.HostCluster))
		// No worker of that host cluster polls: fail, rather than wait for one forever.
		opts.ScheduleToStartTimeout = HostClusterWait
		sctx := workflow.WithActivityOptions(ctx, opts)
		if err := workflow.ExecuteActivity(sctx, a.SelectHost, in.Backend).Get(ctx, &res.Placement); err != nil {
			return res, fmt.Errorf("no worker of host cluster %q (--host-cluster-name) runs backend %s: %w", in.HostCluster, in.Backend, err)
		}
	} else if err := workflow.ExecuteActivity(short, a.SelectHost, in.Backend).Get(ctx, &res.Placement); err != nil {
		return res, fmt.Errorf("no worker runs backend %s: %w", in.Backend, err)
	}
	req := BackendRequest{Backend: in.Backend, Spec: in.Spec}
	record := func(phase api.InstancePhase, endpoint, msg string) error {
		return workflow.ExecuteActivity(short, a.RecordInstance, Record{
			ID: in.Spec.ID, Pool: in.Spec.Pool, Backend: in.Backend, Host: res.Placement.HostID,
			Phase: phase, Endpoint: endpoint, Message: msg,
		}).Get(ctx, nil)
	}
	// Recorded before anything exists, so that a crash at any later point leaves a row that
	// points at the instance: nothing can be created that the store does not know of.
	if err := record(api.InstanceCreating, "", ""); err != nil {
		return res, err
	}

	err := func() error {
		generation, err := golden(ctx, in, res.Placement)
		if err != nil {
			return err
		}
		if generation != "" {
			// The member's database is a copy of the template: the addons are in it.
			req.Spec.Golden, in.Addons = generation, nil
		}
		createCtx := workflow.WithActivityOptions(ctx, createOptions(res.Placement.TaskQueue, in.CreatingTimeout))
		if err := workflow.ExecuteActivity(createCtx, a.BackendCreate, req).Get(ctx, &res.Status); err != nil {
			return err
		}
		waitCtx := workflow.WithActivityOptions(ctx, waitReadyOptions(res.Placement.TaskQueue, in.CreatingTimeout))
		if err := workflow.ExecuteActivity(waitCtx, a.BackendWaitReady, req).Get(ctx, &res.Status); err != nil {
			return err
		}
		if err := addonsAndGates(ctx, in, res.Placement); err != nil {
			return err
		}
		res.Prepared = prepareLeaseCredentials(ctx, req, res.Placement)
		return record(api.InstanceReady, res.Status.Endpoint, "")
	}()
	if err == nil {
		return res, nil
	}

	// Clean up even if the workflow itself was cancelled.
	cleanup, _ := workflow.NewDisconnectedContext(ctx)
	if terr := teardown(cleanup, in.Backend, in.Spec, res.Placement); terr != nil {
		return res, fmt.Errorf("provisioning %s failed (%v) and so did its cleanup: %w", in.Spec.ID, err, terr)
	}
	return res, fmt.Errorf("provisioning %s failed and was cleaned up: %w", in.Spec.ID, err)
}

// addonsAndGates applies the pool's addons, then waits until the instance passes its readiness
// gates; an error fails the provision, whose cleanup deletes the instance, so a member that
// fails its gates never joins the pool.
func addonsAndGates(ctx workflow.Context, in ProvisionInput, placement HostAssignment) error {
	var a *Activities
	if len(in.Addons) > 0 {
		actx := workflow.WithActivityOptions(ctx, addonsOptions(placement.TaskQueue, in.CreatingTimeout))
		req := AddonsRequest{Backend: in.Backend, InstanceID: in.Spec.ID, Addons: in.Addons}
		if err := workflow.ExecuteActivity(actx, a.ApplyAddons, req).Get(ctx, nil); err != nil {
			return fmt.Errorf("applying addons: %w", err)
		}
	}
	if len(in.Gates) == 0 {
		return nil
	}
	timeout := in.GatesTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	gctx := workflow.WithActivityOptions(ctx, gatesOptions(placement.TaskQueue, timeout))
	req := GatesRequest{Backend: in.Backend, InstanceID: in.Spec.ID, Gates: in.Gates,
		Deadline: workflow.Now(ctx).Add(timeout)}
	if err := workflow.ExecuteActivity(gctx, a.WaitReadinessGates, req).Get(ctx, nil); err != nil {
		return fmt.Errorf("readiness gates: %w", err)
	}
	return nil
}

// prepareLeaseCredentials readies the lease credential of an instance about to be Ready, so
// that its lease binds without a call to it. A failure only costs that speed: the lease gets
// its credential from the backend when it binds.
func prepareLeaseCredentials(ctx workflow.Context, req BackendRequest, placement HostAssignment) bool {
	var a *Activities
	pctx := workflow.WithActivityOptions(ctx, prepareCredentialsOptions(placement.TaskQueue))
	var prepared bool
	if err := workflow.ExecuteActivity(pctx, a.PrepareLeaseCredentials, req).Get(ctx, &prepared); err != nil {
		workflow.GetLogger(ctx).Warn("lease credential not prepared: its lease will get one when it binds", "instance", req.Spec.ID, "error", err)
		return false
	}
	return prepared
}

// TeardownInput names the instance to delete and where it lives.
type TeardownInput struct {
	Backend   string                `json:"backend"`
	Spec      backends.InstanceSpec `json:"spec"`
	Placement HostAssignment        `json:"placement"`
	// NotifyPool is the pool to signal member-gone once the instance is verified gone.
	NotifyPool string `json:"notifyPool,omitempty"`
}

// Teardown deletes an instance, verifies it is gone, and removes it from the store. If the
// delete keeps failing the instance is recorded Quarantined and the workflow fails: visible to
// operators, never silently forgotten.
func Teardown(ctx workflow.Context, in TeardownInput) error {
	err := teardown(ctx, in.Backend, in.Spec, in.Placement)
	if in.NotifyPool == "" {
		return err
	}
	if err == nil {
		notifyPool(ctx, in.NotifyPool, SignalMemberGone, MemberReport{InstanceID: in.Spec.ID, Placement: in.Placement})
		return nil
	}
	// The pool hears of a teardown that gave up, and keeps the member as Quarantined instead of
	// waiting for member-gone forever.
	notifyPool(ctx, in.NotifyPool, SignalMemberQuarantined, MemberReport{InstanceID: in.Spec.ID, Placement: in.Placement, Reason: err.Error()})
	return err
}

func teardown(ctx workflow.Context, backend string, spec backends.InstanceSpec, placement HostAssignment) error {
	var a *Activities
	short := workflow.WithActivityOptions(ctx, StoreWriteOptions())
	rec := Record{ID: spec.ID, Pool: spec.Pool, Backend: backend, Host: placement.HostID}
	rec.Phase = api.InstanceDeleting
	if err := workflow.ExecuteActivity(short, a.RecordInstance, rec).Get(ctx, nil); err != nil {
		return err
	}
	delCtx := workflow.WithActivityOptions(ctx, deleteOptions(placement.TaskQueue))
	err := workflow.ExecuteActivity(delCtx, a.BackendDelete, BackendRequest{Backend: backend, Spec: spec}).Get(ctx, nil)
	if err != nil {
		rec.Phase, rec.Message = api.InstanceQuarantined, err.Error()
		_ = workflow.ExecuteActivity(short, a.RecordInstance, rec).Get(ctx, nil)
		return fmt.Errorf("deleting %s: %w", spec.ID, err)
	}
	return workflow.ExecuteActivity(short, a.ForgetInstance, spec.ID).Get(ctx, nil)
}
