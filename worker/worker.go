// Package worker wires kobe's workflows and activities onto Temporal task queues.
package worker

import (
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/workflows"
)

// Register adds every kobe workflow and activity to w. Tests use it too, so that what is
// tested is exactly what runs.
func Register(w sdkworker.Registry, acts *activities.Activities) {
	w.RegisterWorkflowWithOptions(workflows.Doctor, workflow.RegisterOptions{Name: workflows.DoctorWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Provision, workflow.RegisterOptions{Name: workflows.ProvisionWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Teardown, workflow.RegisterOptions{Name: workflows.TeardownWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Pool, workflow.RegisterOptions{Name: workflows.PoolWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Lease, workflow.RegisterOptions{Name: workflows.LeaseWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Preflight, workflow.RegisterOptions{Name: workflows.PreflightWorkflowName})
	w.RegisterActivity(acts)
}

// StopTimeout bounds how long Stop waits for the worker's polls and running tasks to end. With
// the SDK's default (0) Stop returns at once and leaves its long polls and activities talking
// to Temporal; a process that then stops its Temporal server or closes its client logs a burst
// of poll and dial errors. Activities still running after it are cancelled and retried by
// Temporal on another start, as after a crash.
const StopTimeout = 10 * time.Second

// New creates (but does not start) the worker for taskQueue.
func New(c client.Client, taskQueue string, acts *activities.Activities) sdkworker.Worker {
	w := sdkworker.New(c, taskQueue, sdkworker.Options{WorkerStopTimeout: StopTimeout})
	Register(w, acts)
	return w
}
