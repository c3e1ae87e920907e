package api

// kobe's vocabulary: the phases of a lease and the reason codes, defined once here and used by
// the store, the workflows, the API server and the CLI. This package imports nothing of kobe,
// so every layer can use them (docs/architecture.md, "The import graph").

// LeasePhase is where a lease is in its life (upstream's names).
type LeasePhase string

const (
	LeasePending  LeasePhase = "Pending"
	LeaseBound    LeasePhase = "Bound"
	LeaseReleased LeasePhase = "Released"
	LeaseExpired  LeasePhase = "Expired"
	LeaseFailed   LeasePhase = "Failed"
)

// ActiveLeasePhases are the phases of a lease that holds, or waits for, an instance: they count
// against quotas, and an alias is taken while its lease is in one.
var ActiveLeasePhases = []LeasePhase{LeasePending, LeaseBound}

// Active says whether the lease holds, or waits for, an instance.
func (p LeasePhase) Active() bool { return p == LeasePending || p == LeaseBound }

// Ended says whether the lease is over (it never changes again).
func (p LeasePhase) Ended() bool { return p == LeaseReleased || p == LeaseExpired || p == LeaseFailed }

// InstancePhase is where one cluster instance is, as kobe's store records it.
type InstancePhase string

const (
	InstanceCreating InstancePhase = "Creating"
	InstanceReady    InstancePhase = "Ready"
	InstanceDeleting InstancePhase = "Deleting"
	// InstanceUnhealthy: the instance failed its pool's health checks.
	InstanceUnhealthy InstancePhase = "Unhealthy"
	// InstanceQuarantined: its teardown kept failing; it stays visible until an operator acts.
	InstanceQuarantined InstancePhase = "Quarantined"
	// InstanceSleeping: its compute is stopped on purpose and its state kept (a lease's sleep);
	// a wake brings it back Ready.
	InstanceSleeping InstancePhase = "Sleeping"
)

// PoolPhase is a pool's state as a whole (upstream's names).
type PoolPhase string

const (
	PoolHealthy     PoolPhase = "Healthy"
	PoolScalingUp   PoolPhase = "ScalingUp"
	PoolScalingDown PoolPhase = "ScalingDown"
	PoolBackoff     PoolPhase = "Backoff"
	PoolFailing     PoolPhase = "Failing"
	PoolIdle        PoolPhase = "Idle"
	// PoolDraining: deleted, tearing its members down (leased ones when their leases end).
	PoolDraining PoolPhase = "Draining"
	// PoolUnknown: the API could not ask the pool's workflow (it shows the store's counts).
	PoolUnknown PoolPhase = "Unknown"
)

// ReasonCode says why a request was refused, or why a lease ended or changed. Reason codes are
// part of the API contract: clients branch on them, so they never change (docs/api.md).
type ReasonCode string

// Refusals of any request.
const (
	ReasonInvalidRequest ReasonCode = "invalid_request"
	ReasonNotFound       ReasonCode = "not_found"
	ReasonNotReady       ReasonCode = "not_ready"
	ReasonBackendError   ReasonCode = "backend_error"
	ReasonDegraded       ReasonCode = "degraded"
	ReasonInternal       ReasonCode = "internal"
	ReasonUnauthorized   ReasonCode = "unauthorized"
	ReasonForbidden      ReasonCode = "forbidden"
	ReasonRateLimited    ReasonCode = "rate_limited"
)

// Refusals of a lease, and why a lease ended or changed.
const (
	ReasonQuotaExhausted           ReasonCode = "quota_exhausted"
	ReasonPoolExhausted            ReasonCode = "pool_exhausted"
	ReasonExtensionBudgetExhausted ReasonCode = "extension_budget_exhausted"
	ReasonMaxTTLCeiling            ReasonCode = "max_ttl_ceiling"
	ReasonIdempotencyConflict      ReasonCode = "idempotency_conflict"
	ReasonAliasTaken               ReasonCode = "alias_taken"
	ReasonExpired                  ReasonCode = "expired"
	// ReasonIdleTimeout ends a lease whose heartbeats stopped for its idle timeout.
	ReasonIdleTimeout ReasonCode = "idle_timeout"
	// ReasonOrphaned fails a lease that stayed Pending without a workflow past the orphan
	// reaper's grace: the API that admitted it stopped before it started it (lease.ReapOrphans).
	ReasonOrphaned ReasonCode = "orphaned"
	// ReasonHealthFailed: a member failed its pool's health checks failureThreshold times in a
	// row; it is recycled, and a lease bound to it carries a condition with this reason.
	ReasonHealthFailed ReasonCode = "health_failed"
	// ReasonCertificatesExpiring: the leased member's certificates expire within its pool's
	// spec.certificates.recycleBefore and its backend cannot re-issue them in place (condition
	// CertificatesValid of a lease).
	ReasonCertificatesExpiring ReasonCode = "certificates_expiring"
)

// Why an instance could not sync an object onto its host (condition Synced of a lease; the
// vcluster backend's syncer, docs/backends/vcluster.md).
const (
	// ReasonSyncDenied: the host's admission refused it (PodSecurity, a webhook, RBAC).
	ReasonSyncDenied ReasonCode = "sync_denied"
	// ReasonSyncConflict: the host object exists and is not the syncer's, or changed under it.
	ReasonSyncConflict ReasonCode = "sync_conflict"
	// ReasonHostQuotaExceeded: a ResourceQuota of the host namespace.
	ReasonHostQuotaExceeded ReasonCode = "host_quota_exceeded"
	// ReasonUnsupportedResource: the host does not serve the kind or field.
	ReasonUnsupportedResource ReasonCode = "unsupported_resource"
	// ReasonSyncFailed: anything else the syncer reports.
	ReasonSyncFailed ReasonCode = "sync_failed"
)

// A lease's sleep and wake (condition Sleeping, and the refusals of POST /v1/leases/{id}/sleep|wake).
const (
	// ReasonAsleep: the lease's instance is asleep; its kubeconfig's requests are refused.
	ReasonAsleep ReasonCode = "asleep"
	// ReasonInactive: the lease's instance was put to sleep by its pool's
	// spec.sleep.afterInactivity: nothing was seen of the lease for that long.
	ReasonInactive ReasonCode = "inactive"
	// ReasonAwake: the lease's instance woke from a sleep.
	ReasonAwake ReasonCode = "awake"
	// ReasonWakeFailed: the instance did not wake within its pool's resumeTimeout: it is broken.
	ReasonWakeFailed ReasonCode = "wake_failed"
	// ReasonSleepUnsupported refuses a sleep on a backend that cannot put instances to sleep.
	ReasonSleepUnsupported ReasonCode = "sleep_unsupported"
	// ReasonSleeping refuses what a sleeping lease's cluster cannot do until it wakes: an
	// extension (its new credential is issued by the cluster) and a kubeconfig read (409; the
	// detail says to wake it: `kobe lease wake ID`, POST /v1/leases/{id}/wake). Also while a
	// sleep or a wake of it is under way.
	ReasonSleeping ReasonCode = "sleeping"
)

// Refusals of pool and instance actions.
const (
	// ReasonNotQuarantined refuses an instance action (retry-teardown, forget) on an instance
	// that is not Quarantined.
	ReasonNotQuarantined ReasonCode = "not_quarantined"
	// ReasonPoolChanged refuses a delete of a pool that was applied again while the delete ran
	// (no workflow held it): nothing was deleted; delete it again if that is still wanted.
	ReasonPoolChanged ReasonCode = "pool_changed"
	// ReasonManagedExternally refuses a PUT or DELETE of a pool that a Kubernetes resource
	// manages (a ClusterPool): change or delete the resource instead; the detail names it.
	ReasonManagedExternally ReasonCode = "managed_externally"
)
