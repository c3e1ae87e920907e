package pool

import (
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
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
const MemberQuarantined MemberPhase = "Quarantined"

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

// SignalMemberDown goes to the pool from a member's host when its backend sees the member stop
// serving on its own (backends.DownNotifier): MemberDown.
const SignalMemberDown = "member-down"

// MemberDown says a member stopped serving without kobe stopping it.
type MemberDown struct {
	InstanceID string `json:"instanceId"`
	// Message says what happened ("its kube-apiserver process ended: signal: killed").
	Message string    `json:"message"`
	At      time.Time `json:"at"`
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
	SignalApply       = "apply"        // poolspec.Policy: a new spec
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

// Assignment tells a lease which instance is its own. It is defined in leasestart: the pool
// hands it to a lease it starts on a warm bind (its Input.Bound) as well as by signal.
type Assignment = leasestart.Assignment

// UpdateClaim is a warm bind in one round trip (BindRequest → BindResult): the API asks the
// pool for a Ready member whose lease credential is prepared. If there is one and no claim is
// queued before it, the pool binds it, starts the lease's workflow with the assignment in its
// input (a child it abandons: the lease keeps its own history), and answers with the
// assignment. Otherwise it answers Bound false and changes nothing: the API starts the lease's
// workflow, which claims by signal and waits in the queue. The Update's id is the lease id: a
// retried request gets the first answer, and a claim already bound (in an earlier run) gets
// its assignment again.
const UpdateClaim = "claim"

// BindRequest is the argument of UpdateClaim.
type BindRequest struct {
	Claim ClaimRequest `json:"claim"`
	// Lease is the input of the lease's workflow, as the API built it; the pool sets its Bound
	// to the assignment. (A pool of v0.1.0 read it as JSON and added the field "bound": the
	// payloads are the same, see leasestart's tests.)
	Lease leasestart.Input `json:"lease"`
	// SearchAttributes are the lease workflow's keyword search attributes, by name.
	SearchAttributes map[string]string `json:"searchAttributes,omitempty"`
}

// BindResult answers UpdateClaim.
type BindResult struct {
	Bound      bool       `json:"bound"`
	Assignment Assignment `json:"assignment,omitempty"`
	// Why is why a claim was not bound at once (for metrics and logs).
	Why string `json:"why,omitempty"`
}

// ClaimFailure tells a lease it will not get an instance.
type ClaimFailure struct {
	Reason string `json:"reason"` // pool_exhausted, pool_deleted
	Detail string `json:"detail"`
}
