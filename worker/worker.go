// Package worker wires kobe's workflows and activities onto Temporal task queues.
package worker

import (
	"time"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register adds every kobe workflow and activity to w. Tests use it too, so that what is
// tested is exactly what runs.
func Register(w sdkworker.Registry, acts *Activities) {
	w.RegisterWorkflowWithOptions(doctor.Doctor, workflow.RegisterOptions{Name: doctor.WorkflowName})
	w.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	w.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	w.RegisterWorkflowWithOptions(instance.Sleep, workflow.RegisterOptions{Name: instance.SleepWorkflowName})
	w.RegisterWorkflowWithOptions(instance.Wake, workflow.RegisterOptions{Name: instance.WakeWorkflowName})
	w.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	w.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	w.RegisterWorkflowWithOptions(instance.Preflight, workflow.RegisterOptions{Name: instance.PreflightWorkflowName})
	w.RegisterWorkflowWithOptions(pool.CertificateSweep, workflow.RegisterOptions{Name: pool.CertificateSweepWorkflowName})
	w.RegisterWorkflowWithOptions(pool.WarmWindow, workflow.RegisterOptions{Name: pool.WarmWindowWorkflowName})
	w.RegisterWorkflowWithOptions(lease.ScheduledSleep, workflow.RegisterOptions{Name: pool.ScheduledSleepWorkflowName})
	w.RegisterWorkflowWithOptions(lease.ReapOrphans, workflow.RegisterOptions{Name: lease.OrphanReaperWorkflowName})
	acts.RegisterActivities(w)
}

// StopTimeout bounds how long Stop waits for the worker's polls and running tasks to end. With
// the SDK's default (0) Stop returns at once and leaves its long polls and activities talking
// to Temporal; a process that then stops its Temporal server or closes its client logs a burst
// of poll and dial errors. Activities still running after it are cancelled and retried by
// Temporal on another start, as after a crash.
const StopTimeout = 10 * time.Second

// New creates (but does not start) the worker for taskQueue.
func New(c client.Client, taskQueue string, acts *Activities) sdkworker.Worker {
	// Pollers scale with the load (the default is two per kind): a burst of binds keeps enough
	// workflow-task polls waiting that no pool or lease task queues behind another.
	w := sdkworker.New(c, taskQueue, sdkworker.Options{WorkerStopTimeout: StopTimeout,
		WorkflowTaskPollerBehavior: sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{}),
		ActivityTaskPollerBehavior: sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{})})
	Register(w, acts)
	return w
}
