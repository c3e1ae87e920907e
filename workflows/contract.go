package workflows

import "time"

// The messages the hardening of pools and leases added between the pool, its leases and the
// API: health reports, quarantine actions and lease conditions. They are defined here, apart
// from the workflows that act on them, so that the API and the workflows agree on one shape.

// Signals the pool receives from the API about a Quarantined member.
const (
	// SignalRetryTeardown asks the pool to try a Quarantined member's teardown again (MemberAction).
	SignalRetryTeardown = "retry-teardown"
	// SignalForgetMember tells the pool an operator cleaned a Quarantined member up by hand:
	// the pool drops it and its store row goes (MemberAction).
	SignalForgetMember = "forget-member"
)

// MemberAction names a member an operator acts on, and who did.
type MemberAction struct {
	InstanceID string `json:"instanceId"`
	Actor      string `json:"actor"`
}

// MemberQuarantined is a member whose verified teardown kept failing: it stays in the pool,
// visible, until an operator retries its teardown or forgets it.
const MemberQuarantined = "Quarantined"

// SignalInstanceUnhealthy goes from the pool to a lease whose member failed its health checks
// (HealthReport); the lease shows it as a condition.
const SignalInstanceUnhealthy = "instance-unhealthy"

// HealthReport says a member failed its health checks failureThreshold times in a row.
type HealthReport struct {
	InstanceID string    `json:"instanceId"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message"`
	Failures   int       `json:"failures"`
	At         time.Time `json:"at"`
}

// LeaseCondition is one observation about a lease, in the shape of Kubernetes conditions.
type LeaseCondition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"` // "True" or "False"
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// ConditionInstanceHealthy is False once the lease's instance failed its health checks.
const ConditionInstanceHealthy = "InstanceHealthy"

// Health check vocabulary.
const (
	// ReasonHealthFailed is the reason of a member recycled, or a lease's condition set, after
	// failureThreshold failed health checks in a row.
	ReasonHealthFailed  = "health_failed"
	RecycleHealthFailed = ReasonHealthFailed
	// MetricHealthChecks counts health checks of Ready and Leased members by result (ok, failed).
	MetricHealthChecks = "kobe_health_checks_total"
)

// PoolDeletion is the payload of SignalDeletePool: the store generation of the pool's row the
// delete saw (0 from an older kobe: forget whatever row there is).
type PoolDeletion struct {
	Generation int64 `json:"generation"`
}
