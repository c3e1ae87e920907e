package server

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/kunobi-ninja/kobe/lease"
)

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
		_, err = lease.Start(actx, s.Temporal, s.TaskQueue, in, s.SearchAttributes)
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
