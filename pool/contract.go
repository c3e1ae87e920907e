package pool

import "time"

// The messages between the pool, its leases and the API that the hardening of pools and leases
// added: health reports and quarantine actions. The lease's conditions are in lease/.

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
