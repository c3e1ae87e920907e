package instance

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The activity options of kobe's workflows, one named function per kind of activity, so that
// how long each may take and how it is retried is read in one place. Backend calls heartbeat:
// a worker killed in the middle of one is noticed within the heartbeat timeout, and the call
// (idempotent by instance id) is retried on the host's next worker.

// StoreWriteOptions: a projection into kobe's store (a row and its audit event), or a choice of
// host. Retried until it lands: the store coming back is all it needs.
func StoreWriteOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	}
}

// createOptions: the backend's Create, on the instance's host, within the creating timeout.
func createOptions(queue string, creatingTimeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: creatingTimeout,
		HeartbeatTimeout:       15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	}
}

// prepareCredentialsOptions: preparing a Ready instance's lease credential on its host (an RBAC
// grant and the wait for the authorizer to honour it). Short: a failure only means the lease
// gets its credential when it binds.
func prepareCredentialsOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 2 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3},
	}
}

// waitReadyOptions: the backend's WaitReady, as long as the creating timeout allows; a worker
// that dies mid-wait is replaced by the host's next one, which re-adopts the instance.
func waitReadyOptions(queue string, creatingTimeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    creatingTimeout,
		ScheduleToCloseTimeout: creatingTimeout,
		HeartbeatTimeout:       15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	}
}

// addonsOptions: applying a pool's addons with the admin kubeconfig, which lives on the
// instance's host.
func addonsOptions(queue string, creatingTimeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: creatingTimeout,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	}
}

// gatesOptions: waiting for the readiness gates. The activity stops at the deadline itself and
// says which gates failed; the minute of slack lets that answer arrive before Temporal's own
// timeout would hide it.
func gatesOptions(queue string, timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    timeout + time.Minute,
		ScheduleToCloseTimeout: timeout + time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	}
}

// deleteOptions: the backend's verified Delete, retried for up to 15 minutes before the
// teardown gives up and the member is quarantined.
func deleteOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:       15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	}
}

// preflightOptions: judging a pool's spec while an API request waits. A lost worker is retried
// once; the verdicts (refusal, environment down) are final.
func preflightOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    20 * time.Second,
		ScheduleToCloseTimeout: PreflightTimeout - 5*time.Second,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	}
}

// sleepOptions: the backend's Sleep on the instance's host (stopping its processes, or scaling
// its workload to zero), retried for a few minutes.
func sleepOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:       15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	}
}

// resumeOptions: the backend's Resume, within the wake's resume timeout (the wait until ready
// that follows gets what is left of it).
func resumeOptions(queue string, resumeTimeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    min(2*time.Minute, resumeTimeout),
		ScheduleToCloseTimeout: resumeTimeout,
		HeartbeatTimeout:       15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	}
}

// checkCertificatesOptions: reading a woken instance's certificate expiry on its host, within
// what is left of its resume timeout.
func checkCertificatesOptions(queue string, left time.Duration) workflow.ActivityOptions {
	bound := min(time.Minute, max(left, time.Second))
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    bound,
		ScheduleToCloseTimeout: bound,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	}
}
