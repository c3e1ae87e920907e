// Package doctor is kobe's diagnostic: a workflow whose activity writes and reads the store
// from a worker, optionally across a durable timer, so that `kobe doctor` proves the wiring.
//
// Like every kobe workflow (doctor, instance, pool, lease), it is deterministic: no I/O, no
// wall clock, no randomness — all of that happens in activities. Every change to a workflow
// that alters its commands goes through a version marker named after the release that adds it
// (docs/architecture.md, "Releases and workflow versions") and keeps the replay tests
// (worker/replay_test.go) green.
package doctor

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// WorkflowName is the registered name of the diagnostic workflow.
const WorkflowName = "Doctor"

// ProgressQuery returns a Progress while the workflow runs.
const ProgressQuery = "progress"

// Input configures a diagnostic run.
type Input struct {
	ProbeID string `json:"probeId"`
	// Hold keeps the workflow waiting in a durable timer between two probes, so that an operator
	// can kill and restart processes and watch the run complete anyway.
	Hold time.Duration `json:"hold,omitempty"`
}

// Result is what a completed run reports.
type Result struct {
	// Probe is the first probe; AfterHold the second one (only with Hold), which may have run on
	// another worker process if the first died during the hold.
	Probe     ProbeResult  `json:"probe"`
	AfterHold *ProbeResult `json:"afterHold,omitempty"`
	// ActivityRoundTrip is workflow → worker → workflow for the first probe, as the workflow saw it.
	ActivityRoundTrip time.Duration `json:"activityRoundTrip"`
	Held              time.Duration `json:"held,omitempty"`
	StartedAt         time.Time     `json:"startedAt"`
	FinishedAt        time.Time     `json:"finishedAt"`
}

// Progress is the answer to ProgressQuery.
type Progress struct {
	Stage     string    `json:"stage"` // probing, holding, probing-after-hold, done
	HoldUntil time.Time `json:"holdUntil,omitempty"`
}

// Doctor proves the wiring end to end: the workflow runs, its activity reaches a worker, the
// worker writes and reads the store, and (with Hold) a durable timer survives restarts.
func Doctor(ctx workflow.Context, in Input) (Result, error) {
	progress := Progress{Stage: "probing"}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) {
		return progress, nil
	}); err != nil {
		return Result{}, err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		// A doctor run must report a dead worker, not wait for one forever.
		ScheduleToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumAttempts:    5,
		},
	})
	var a *Activities

	res := Result{StartedAt: workflow.Now(ctx)}
	t0 := workflow.Now(ctx)
	if err := workflow.ExecuteActivity(ctx, a.DoctorProbe, ProbeInput{ProbeID: in.ProbeID}).Get(ctx, &res.Probe); err != nil {
		return res, err
	}
	res.ActivityRoundTrip = workflow.Now(ctx).Sub(t0)

	if in.Hold > 0 {
		holdStart := workflow.Now(ctx)
		progress = Progress{Stage: "holding", HoldUntil: holdStart.Add(in.Hold)}
		if err := workflow.Sleep(ctx, in.Hold); err != nil {
			return res, err
		}
		res.Held = workflow.Now(ctx).Sub(holdStart)
		progress = Progress{Stage: "probing-after-hold"}
		var after ProbeResult
		if err := workflow.ExecuteActivity(ctx, a.DoctorProbe, ProbeInput{ProbeID: in.ProbeID}).Get(ctx, &after); err != nil {
			return res, err
		}
		res.AfterHold = &after
	}
	progress = Progress{Stage: "done"}
	res.FinishedAt = workflow.Now(ctx)
	return res, nil
}
