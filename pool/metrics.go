package pool

import "go.temporal.io/sdk/client"

// Metrics the workflows emit through the SDK's metrics handler (exported on the worker's
// /metrics; the SDK drops them while a workflow replays, so each is counted once). Names and
// labels follow upstream kobe where it has them; the pool label is "profile".
const (
	// MetricInstanceRecycles counts members torn down, by reason.
	MetricInstanceRecycles = "kobe_instance_recycles_total"
)

type metricsHandler = client.MetricsHandler
