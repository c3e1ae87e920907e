package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// StartLease starts a lease's workflow (id = lease id) on the task queue. With searchable set
// (kobe's search attributes are registered, see EnsureSearchAttributes) the lease is tagged
// with its pool, owner and phase for the Temporal Web UI's filters.
func StartLease(ctx context.Context, c client.Client, taskQueue string, in lease.Input, searchable bool) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		ID:        pool.LeaseWorkflowID(in.LeaseID),
		TaskQueue: taskQueue,
		// A lease id is never reused, not even after the lease ended.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	in.SearchAttributes = searchable
	if searchable {
		opts.TypedSearchAttributes = lease.SearchAttributes(in)
	}
	run, err := c.ExecuteWorkflow(ctx, opts, lease.WorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("starting lease %s: %w", in.LeaseID, err)
	}
	return run, nil
}

// Bounds of startLeaseSurely.
const (
	startLeaseAttempts   = 4
	startLeaseAttemptFor = 10 * time.Second
	startLeasePause      = 500 * time.Millisecond
)

// startLeaseSurely starts a lease's workflow and reports whether it runs. A start whose answer
// is lost (a deadline, the server restarting) may still have started the workflow; calling it
// failed would free the lease's quota while the workflow goes on to bind a cluster. So an
// unclear failure is retried with the same workflow id: "already started" proves it runs, and
// the id's reject-duplicate policy means a retry can never start a second one. It gives up only
// when every attempt failed; the caller then records the lease Failed.
//
// The attempts do not follow the HTTP request's context: a client that hangs up mid-start must
// not turn a started lease into an unclear one.
func (s *Server) startLeaseSurely(ctx context.Context, in lease.Input) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	for attempt := 1; attempt <= startLeaseAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, startLeaseAttemptFor)
		_, err = StartLease(actx, s.Temporal, s.TaskQueue, in, s.SearchAttributes)
		cancel()
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case err == nil || errors.As(err, &started):
			return nil
		case !startMayHaveHappened(err):
			return err
		}
		time.Sleep(time.Duration(attempt) * startLeasePause)
	}
	return err
}

// startMayHaveHappened reports whether a failed start leaves it unknown whether the workflow
// started (the answer was lost), as opposed to a refusal.
func startMayHaveHappened(err error) bool {
	var (
		invalid    *serviceerror.InvalidArgument
		nsNotFound *serviceerror.NamespaceNotFound
		denied     *serviceerror.PermissionDenied
		exhausted  *serviceerror.ResourceExhausted
	)
	return !errors.As(err, &invalid) && !errors.As(err, &nsNotFound) && !errors.As(err, &denied) && !errors.As(err, &exhausted)
}
