package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/backends"
)

// PreflightWorkflowName is the registered name of the workflow that judges a pool's spec
// before `PUT /v1/pools/{name}` applies it.
const PreflightWorkflowName = "PreflightPool"

// PreflightTimeout bounds a whole preflight: the API request that waits for it must answer.
const PreflightTimeout = 30 * time.Second

// PreflightInput is the spec a member of the pool would be created with.
type PreflightInput struct {
	Backend string                `json:"backend"`
	Spec    backends.InstanceSpec `json:"spec"`
}

// Preflight runs the backend's checks of a spec on a worker that runs the backend, and returns
// the verdict. It is a workflow, not a call from the API server, because the backends'
// environments are reachable from the workers only; it is short and creates nothing.
func Preflight(ctx workflow.Context, in PreflightInput) (activities.PreflightResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    20 * time.Second,
		ScheduleToCloseTimeout: PreflightTimeout - 5*time.Second,
		HeartbeatTimeout:       10 * time.Second,
		// A lost worker is retried once; the verdicts (refusal, environment down) are final.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	})
	var a *activities.Activities
	var res activities.PreflightResult
	err := workflow.ExecuteActivity(ctx, a.PreflightSpec, activities.BackendRequest{Backend: in.Backend, Spec: in.Spec}).Get(ctx, &res)
	return res, err
}
