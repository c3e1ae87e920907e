package lease

// ConditionInstanceHealthy is False once the lease's instance failed its health checks.
const ConditionInstanceHealthy = "InstanceHealthy"

// ConditionSynced is False while the lease's instance reports objects it could not sync onto
// its host (a backend that syncs, such as vcluster), with the newest error's reason code
// (api.ReasonSyncDenied, …), and True again once they are over.
const ConditionSynced = "Synced"

// ConditionCertificatesValid is False once the pool found that the lease's instance's
// certificates expire within its recycleBefore and its backend cannot re-issue them in place
// (reason certificates_expiring); a backend that can re-issues them and the lease sees nothing.
const ConditionCertificatesValid = "CertificatesValid"

// ActionLeaseCondition is the audit action of a change of one of a lease's conditions.
const ActionLeaseCondition = "lease.condition"

// ConditionSleeping is True while the lease's instance is asleep (UpdateSleep: reason asleep),
// False once it woke (reason awake) or failed to (reason wake_failed, and InstanceHealthy False).
const ConditionSleeping = "Sleeping"
