package lease

import "go.temporal.io/sdk/client"

// Metrics the lease workflow emits through the SDK's metrics handler (exported on the worker's
// /metrics; the SDK drops them while a workflow replays, so each is counted once). Names and
// labels follow upstream kobe where it has them; the pool label is "profile".
const (
	// MetricClaimBindDuration is a lease's time from claim to Bound (histogram, seconds).
	MetricClaimBindDuration = "kobe_claim_bind_duration_seconds"
	// MetricClaims counts lease events: created_fast (bound without queuing), created_queued,
	// released, expired, extended, failed.
	MetricClaims = "kobe_claims_total"
	// MetricLeaseInstanceUnhealthy counts Bound leases whose instance failed its health checks.
	MetricLeaseInstanceUnhealthy = "kobe_lease_instance_unhealthy_total"
	// MetricLeaseSleeps counts the sleeps of Bound leases by cause: request (kobe lease sleep,
	// POST /v1/leases/{id}/sleep), schedule (spec.sleep.schedule) or inactivity
	// (spec.sleep.afterInactivity).
	MetricLeaseSleeps = "kobe_lease_sleeps_total"
)

type metricsHandler = client.MetricsHandler
