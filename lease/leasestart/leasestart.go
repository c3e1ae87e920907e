// Package leasestart is how a lease's workflow is started: its registered type, its id and its
// Input. Three starters use it: the API when no warm bind took the lease (lease.Start), the pool
// on a warm bind (pool.UpdateClaim, with the Assignment in Input.Bound), and the lease itself
// when it continues as new (Input.Resume). It sits below both pool and lease, so that the pool
// starts a lease with a typed Input instead of patching JSON it cannot read, and it holds what
// the Input is made of: the pool's Assignment and the lease's View.
package leasestart

import (
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// WorkflowType is the registered name of the lease workflow.
const WorkflowType = "Lease"

// WorkflowID is the workflow id of a lease (lease ids already start with "lease-").
func WorkflowID(leaseID string) string { return leaseID }

// Input starts a lease's workflow. It is the lease's shape at its start: who holds it, its
// pool, and the terms its pool granted it at admission (poolspec.LeaseTerms, embedded so that
// their JSON names are the Input's own: ttl, maxTtl, maxExtensions, afterInactivity… as v0.1.0
// wrote them).
type Input struct {
	LeaseID   string `json:"leaseId"`
	Pool      string `json:"pool"`
	Principal string `json:"principal"`
	poolspec.LeaseTerms
	Priority int `json:"priority"`
	// IdleTimeout, when set, ends a Bound lease (Expired, reason idle_timeout) that got no
	// heartbeat signal for that long: a crashed CI job gives its cluster back early. The
	// holder's, not its pool's. Runs that predate it have it zero, so they replay unchanged.
	IdleTimeout time.Duration `json:"idleTimeout,omitempty"`
	// SearchAttributes says the starter set KobePool/KobeOwner/KobePhase (they are registered
	// on the namespace), so the lease keeps KobePhase current for the Web UI's filters.
	SearchAttributes bool `json:"searchAttributes,omitempty"`
	// ContinueAsNewAfter is the history length (events) past which a Bound lease continues as
	// new, so that heartbeats and extensions never grow one run without bound; zero means
	// the lease's default (5000). The server's suggestion (GetContinueAsNewSuggested) also does.
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// Resume carries a Bound lease into the next run when it continues as new: that run
	// neither claims nor issues credentials again, it goes on holding the same instance.
	Resume *Resume `json:"resume,omitempty"`
	// Bound is set when the pool started the lease on a warm bind (pool.UpdateClaim): the
	// lease is Bound from its first event, to this member, with a credential minted from the
	// member's prepared credential. It neither claims nor issues credentials.
	Bound *Assignment `json:"bound,omitempty"`
}

// Resume is the state of a Bound lease that its next run starts from.
type Resume struct {
	View       View       `json:"view"`
	Assignment Assignment `json:"assignment"`
	// LastSeen is the last heartbeat (or the bind time), for the idle timeout.
	LastSeen time.Time `json:"lastSeen"`
	// LastActive is the newest activity that does not count for the idle timeout (AfterInactivity).
	LastActive time.Time `json:"lastActive,omitempty"`
	// IssueFor is how long a credential issuance may retry.
	IssueFor time.Duration `json:"issueFor"`
}

// View is the lease as its workflow has it: what QueryLease answers (the API shows it,
// api.Lease), what the lease's Updates and its workflow return, and what the workflow writes of
// the lease's store row (lease.Row). It is lease.State's public part, and what a Bound lease
// carries into its next run (Resume).
type View struct {
	ID   string `json:"id"`
	Pool string `json:"pool"`
	// Principal holds the lease and TTL is its granted TTL: the Input's, kept here so that the
	// view is all the row needs. (The projection of v0.1.0 sent them as "principal" and "ttl".)
	Principal  string         `json:"principal,omitempty"`
	TTL        time.Duration  `json:"ttl,omitempty"`
	Phase      api.LeasePhase `json:"phase"`
	Reason     api.ReasonCode `json:"reason,omitempty"`
	InstanceID string         `json:"instanceId,omitempty"`
	Endpoint   string         `json:"endpoint,omitempty"`
	BoundAt    time.Time      `json:"boundAt,omitempty"`
	ExpiresAt  time.Time      `json:"expiresAt,omitempty"`
	Extensions int            `json:"extensions"`
	// ClaimedAt is when the lease asked its pool; AssignmentSeq the pool's order of assignment.
	ClaimedAt     time.Time `json:"claimedAt"`
	AssignmentSeq int64     `json:"assignmentSeq,omitempty"`
	// Conditions are observations about the lease, such as its instance failing health checks.
	Conditions []api.LeaseCondition `json:"conditions,omitempty"`
	// IdleTimeout is the lease's idle timeout (zero: none), so that the API heartbeats only
	// the leases that need it.
	IdleTimeout time.Duration `json:"idleTimeout,omitempty"`
	// AfterInactivity is the lease's Input.AfterInactivity, so that the API tells only the
	// leases that need it of their holder's requests (SignalActivity).
	AfterInactivity time.Duration `json:"afterInactivity,omitempty"`
	// Sleeping says the lease's instance is asleep (UpdateSleep); Sleeps counts its sleeps and
	// wakes, which number their workflows.
	Sleeping bool `json:"sleeping,omitempty"`
	Sleeps   int  `json:"sleeps,omitempty"`
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
	// At is when the pool bound the member (set by UpdateClaim; the lease's bind time), and
	// Prepared says the member's lease credential was prepared when it became Ready.
	At       time.Time `json:"at,omitempty"`
	Prepared bool      `json:"prepared,omitempty"`
}
