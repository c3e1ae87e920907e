package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The certificate workflow: a Temporal Schedule (CertificateScheduleID, daily, and triggered
// once when a worker starts) runs CertificateSweep, which asks every pool to check its members'
// certificates (SignalCheckCertificates). What a pool does about them is its own decision
// (CertificatesChecked).

// CertificateSweepWorkflowName is the registered name of CertificateSweep.
const CertificateSweepWorkflowName = "CertificateSweep"

// CertificateScheduleID is the id of the one Temporal Schedule of the certificate workflow.
const CertificateScheduleID = "kobe-certificates"

// CertificateSweepInterval is how often the schedule runs the sweep.
const CertificateSweepInterval = 24 * time.Hour

// SweepResult says which pools were asked to check their certificates.
type SweepResult struct {
	Signalled []string `json:"signalled"`
	// Missed are the pools whose workflow did not take the signal (not running).
	Missed []string `json:"missed,omitempty"`
}

// CertificateSweep lists the pools and signals each one's workflow to check its members'
// certificates. It is short: the checks run in the pools, on their members' hosts.
func CertificateSweep(ctx workflow.Context) (SweepResult, error) {
	var a *Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var names []string
	if err := workflow.ExecuteActivity(actx, a.ListPoolNames).Get(ctx, &names); err != nil {
		return SweepResult{}, err
	}
	var res SweepResult
	futures := make([]workflow.Future, len(names))
	for i, name := range names {
		futures[i] = workflow.SignalExternalWorkflow(ctx, WorkflowID(name), "", SignalCheckCertificates, nil)
	}
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			res.Missed = append(res.Missed, names[i])
			continue
		}
		res.Signalled = append(res.Signalled, names[i])
	}
	return res, nil
}

// ListPoolNames lists the pools in the store, by name.
func (a *Activities) ListPoolNames(ctx context.Context) ([]string, error) {
	ps, err := a.Store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names, nil
}

// EnsureCertificateSchedule creates the certificate workflow's schedule if it does not exist
// (every CertificateSweepInterval, never two sweeps at once, visible in the Web UI), then
// triggers one sweep now: a worker that starts checks at once rather than a day later.
func EnsureCertificateSchedule(ctx context.Context, c client.Client, taskQueue string) error {
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:      CertificateScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: CertificateSweepInterval}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID:                       "certificate-sweep",
			Workflow:                 CertificateSweepWorkflowName,
			TaskQueue:                taskQueue,
			WorkflowExecutionTimeout: time.Hour,
		},
		Note: "kobe: asks every pool to check its members' certificates (issue 18)",
	})
	var exists *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) && !errors.As(err, &exists) {
		return fmt.Errorf("creating the certificate schedule: %w", err)
	}
	if err := sc.GetHandle(ctx, CertificateScheduleID).Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP}); err != nil {
		return fmt.Errorf("triggering the certificate schedule: %w", err)
	}
	return nil
}
