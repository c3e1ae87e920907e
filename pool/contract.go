package pool

import (
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/instance"
)

// The messages between the pool, its leases and the API: claims, releases, assignments, claim
// failures, health reports and quarantine actions. The lease's conditions are in lease/; the
// members' reports are in instance/.

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

// SignalInstanceSync goes from the pool to a lease when what its member could not sync onto
// its host changed (SyncReport, from a backend that syncs: backends.SyncErrorReporter); the
// lease shows it as its Synced condition.
const SignalInstanceSync = "instance-sync"

// SyncReport says whether a member synced every object onto its host lately
// (instance.SyncState): Synced, or the reason code of the newest sync error.
type SyncReport struct {
	InstanceID string         `json:"instanceId"`
	Synced     bool           `json:"synced"`
	Reason     api.ReasonCode `json:"reason,omitempty"`
	Message    string         `json:"message,omitempty"`
	// Objects counts the objects with a sync error.
	Objects int       `json:"objects,omitempty"`
	At      time.Time `json:"at"`
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

// Deletion is the payload of SignalDeletePool: the store generation of the pool's row the
// delete saw (0 from an older kobe: forget whatever row there is).
type Deletion struct {
	Generation int64 `json:"generation"`
}

// Signals the pool receives, and the query it answers.
const (
	SignalClaim       = "claim"        // ClaimRequest, from a lease
	SignalCancelClaim = "cancel-claim" // lease id, from a lease that no longer waits
	SignalRelease     = "release"      // ReleaseRequest, from a lease done with its instance
	SignalApply       = "apply"        // pools.Policy: a new spec
	SignalDeletePool  = "delete"       // drain and forget the pool
	QueryPoolStatus   = "status"
)

// Signals a lease receives from its pool.
const (
	SignalAssigned    = "assigned"     // Assignment
	SignalClaimFailed = "claim-failed" // ClaimFailure
)

// ClaimRequest is a lease asking for an instance.
type ClaimRequest struct {
	LeaseID  string    `json:"leaseId"`
	Priority int       `json:"priority"`
	At       time.Time `json:"at"`
}

// ReleaseRequest hands an instance back; the pool tears it down (never reused).
type ReleaseRequest struct {
	LeaseID    string `json:"leaseId"`
	InstanceID string `json:"instanceId"`
	Reason     string `json:"reason"`
}

// Assignment tells a lease which instance is its own.
type Assignment struct {
	// Seq numbers the pool's assignments in the order it made them.
	Seq        int64                   `json:"seq"`
	InstanceID string                  `json:"instanceId"`
	Backend    string                  `json:"backend"`
	Placement  instance.HostAssignment `json:"placement"`
	Endpoint   string                  `json:"endpoint"`
	// Queued is false when a Ready member was there for the claim the moment it arrived.
	Queued bool `json:"queued,omitempty"`
}

// ClaimFailure tells a lease it will not get an instance.
type ClaimFailure struct {
	Reason string `json:"reason"` // pool_exhausted, pool_deleted
	Detail string `json:"detail"`
}
