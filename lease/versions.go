package lease

// Versions of the lease workflow's behaviour.
const (
	leaseVersionChange = "lease-search-attributes"
	// leaseVersionSearchAttributes keeps KobePhase current.
	leaseVersionSearchAttributes = 1
	// leaseVersionClaimFirst sends the claim before the Pending row is written.
	leaseVersionClaimFirst = "lease-claim-first"
	// leaseVersionPatientCredentials gives credential issuance 10 minutes instead of 2.
	leaseVersionPatientCredentials = "lease-patient-credentials"
	// leaseVersionAtomicExtend issues an extension's credential before it commits the new
	// expiry: a failed extension changes nothing and spends no budget.
	leaseVersionAtomicExtend = "lease-atomic-extend"
	// leaseVersionBoundRuns holds a Bound lease in runs that continue as new (with every signal
	// drained and every handler finished), records its instance's health as a condition, and
	// re-arms its timers only when they fire, so that heartbeats do not grow its history.
	leaseVersionBoundRuns = "lease-bound-runs"
	// leaseVersionConditionsAudited shows the instance's sync errors as the condition Synced
	// (SignalInstanceSync from the pool) and audits every change of a condition
	// (RecordLeaseCondition).
	leaseVersionConditionsAudited = "lease-conditions-audited"
	// leaseVersionCertificates shows that the instance's certificates expire soon and cannot be
	// re-issued in place as the condition CertificatesValid (SignalInstanceCertificates).
	leaseVersionCertificates = "lease-certificates"
	// leaseVersionSleeps (issue 18): a Bound lease sleeps and wakes its instance (UpdateSleep,
	// UpdateWake, each a child workflow: instance.Sleep, instance.Wake), shows it as the
	// condition Sleeping, and does not revoke the credential of an instance that ends asleep.
	// Only runs that sleep carry the marker (in the update's handler).
	leaseVersionSleeps = "lease-sleeps"
	// leaseVersionAutoSleep (issue 18): a Bound lease of a pool with spec.sleep.afterInactivity
	// (Input.AfterInactivity) puts itself to sleep once no activity was seen for that long
	// (autoSleep). Only runs that check their backend's record carry the marker.
	leaseVersionAutoSleep = "lease-auto-sleep"
	// leaseVersionScheduleCause (issue 39): a sleep or wake a pool's schedule asks
	// (SleepCauseSchedule) is not the holder's activity: it does not move lastSeen, and its
	// sleep is counted with cause "schedule". Only runs that get such a request carry the
	// marker (in the update's handler).
	leaseVersionScheduleCause = "lease-schedule-cause"
	// leaseVersionSleepingRefusesExtend (issue 39, item 5): an extension accepted while the
	// lease was awake that finds it asleep (or a sleep or wake under way) once it may run is
	// refused with sleeping instead of issuing a credential its stopped cluster cannot give; and
	// expiry (TTL or idle timeout) is checked while an extension issues its credential: the
	// lease ends on time, and an extension still issuing when it ends (expiry or release) is
	// abandoned (its issuance cancelled, answered not_ready) instead of holding the lease until
	// the issuance gives up (up to 10 minutes). Before it the lease neither expired nor ended
	// under an extension. Only runs where one of these happens carry the marker. (The extend
	// validator's refusal of a sleeping lease needs no marker: validators do not run on replay,
	// and a refused Update leaves no event.)
	leaseVersionSleepingRefusesExtend = "lease-sleeping-refuses-extend"
)
