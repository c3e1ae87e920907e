package pool

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The pool's own activity options (the store writes it shares with the other workflows are
// instance.StoreWriteOptions).

// recordInstanceOptions: a member's store row (e.g. Unhealthy), written while the pool goes on;
// bounded so that a store that stays down does not keep the pool's futures open for ever.
func recordInstanceOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	}
}

// healthCheckOptions: one round of health checks on a host, never retried: the next round is
// the retry, and failures count only when they repeat.
func healthCheckOptions(queue string, timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToCloseTimeout: timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

// freezeOptions: a freeze or thaw of a member on its host, a few attempts, bounded so that a
// host whose worker is gone does not leave the member Freezing or Thawing for ever.
func freezeOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToCloseTimeout: time.Minute,
		StartToCloseTimeout:    20 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3},
	}
}
