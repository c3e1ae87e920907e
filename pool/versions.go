package pool

import "go.temporal.io/sdk/workflow"

// Versions of the pool's behaviour (workflow.GetVersion) so that runs recorded before a change
// replay as they ran.
const (
	poolVersionChange = "pool-drift-wedged-metrics"
	// poolVersionRolling adds drift rolling, wedged-creation recycling and recycle metrics.
	poolVersionRolling workflow.Version = 1

	// poolVersionCancelChange: a claim cancelled after its assignment went out tears the
	// assigned member down. Before it, a lease released while Pending could end before the
	// assignment signal reached it; the member stayed Leased to a finished lease for good
	// (found by the soak: an instance outlived its pool's deletion).
	poolVersionCancelChange                    = "pool-cancel-reclaims"
	poolVersionCancelReclaims workflow.Version = 1

	// poolVersionHardenChange (issue 11): health checks of Ready and Leased members, nothing
	// lost across continue-as-new (every channel drained, continue when suggested, Assigned
	// pruned), Quarantined members, member ids unique across incarnations of a pool name,
	// maxSurge honoured during a roll, member workflows that fail to start handled.
	poolVersionHardenChange                  = "pool-hardening"
	poolVersionHardened     workflow.Version = 1

	// poolVersionForgetChange: a drained pool forgets its store row only if it was not applied
	// again since its delete, and reads every signal that came meanwhile before it ends (an
	// apply keeps it serving, a claim is refused): before, an apply landing as the drained pool
	// ended was lost, leaving a pool row with no workflow, and a claim was never answered.
	poolVersionForgetChange                      = "pool-forget-unchanged"
	poolVersionForgetsUnchanged workflow.Version = 1

	// poolVersionSyncChange (issue 17): the health check of a Leased member also reads what
	// its instance could not sync onto its host (backends that sync, such as vcluster) and
	// tells the lease when that changes (SignalInstanceSync).
	poolVersionSyncChange                   = "pool-sync-reports"
	poolVersionSyncReports workflow.Version = 1

	// poolVersionCertificatesChange (issue 18): the pool checks its members' certificates when
	// the certificate workflow asks (SignalCheckCertificates): warm members expiring within
	// spec.certificates.recycleBefore are recycled, leased ones re-issued in place or their
	// lease warned (SignalInstanceCertificates).
	poolVersionCertificatesChange                  = "pool-certificates"
	poolVersionCertificates       workflow.Version = 1
	// poolVersionFreezeChange (issue 15): the pool keeps policy.ThawedSpares Ready members
	// running and freezes the spares beyond them (BackendFreeze, BackendThaw on the member's
	// host queue); claims take a running member first, a claim left with only frozen ones thaws
	// one before it is answered, and the next spare is thawed after a claim (pool/freeze.go).
	poolVersionFreezeChange                   = "pool-freeze-spares"
	poolVersionFreezesSpares workflow.Version = 1
	// poolVersionSchedulesChange (issue 18): the pool keeps its Temporal Schedules
	// (spec.sleep.schedule/wakeSchedule, spec.scaling.schedule) in step with its policy through
	// SyncPoolSchedules, deletes them before a drained pool ends, and takes SignalWarmWindow:
	// another warm target while a window is open (schedules.go).
	poolVersionSchedulesChange                  = "pool-schedules"
	poolVersionSyncsSchedules  workflow.Version = 1

	// poolVersionSettleChange (issue 15): a run that continues as new first waits for what it
	// has under way (freezes and thaws, warm-bound leases' starts, Update handlers) and only
	// then reads the signals delivered, until a round finds neither; and it starts no health
	// check, certificate check or freeze on the pass that continues. Before, it read the signals
	// first and then waited for its freezes, so a release or a member's report delivered during
	// that wait was dropped and its member stayed Leased, Deleting or Creating for good (with
	// frozen spares on by default, TestPoolLosesNothingAcrossContinueAsNew never got the pool
	// back to its size).
	poolVersionSettleChange                             = "pool-settle-before-continuing"
	poolVersionSettlesBeforeContinuing workflow.Version = 1

	// poolVersionKeepClaimsChange (issue 39): a warm bind's thaw holds the lease's claim whole.
	// The slow path's claim of a lease whose warm bind is thawing its member (the API stopped
	// waiting and started the lease itself) waits for the thaw and queues if it fails; a lease
	// that ended during the thaw is neither bound nor torn down a second time; a member being
	// thawed for a claim is not health-checked (its lease has no answer yet); and the actions
	// of a failed thaw wait in the Update handler's coroutine. Before, the claim was dropped as
	// a retry and the lease stayed Pending in no queue, and the failed thaw's teardown panicked
	// the workflow task (a wait on the run's context from the handler).
	poolVersionKeepClaimsChange                          = "pool-keeps-claims-of-failed-thaws"
	poolVersionKeepsClaimsOfFailedThaws workflow.Version = 1

	// poolVersionMemberDownChange (issue 39): the pool takes SignalMemberDown, which a member's
	// host sends the moment its backend sees the member stop serving on its own (a process
	// killed or crashed: backends.DownNotifier). A Ready member is recycled at once and a Leased
	// one reported to its lease, as after failureThreshold failed health checks. Before, only
	// the health check saw it, up to an interval later, and a warm bind could hand the dead
	// member out meanwhile (it takes a Ready member without calling it).
	poolVersionMemberDownChange                  = "pool-takes-member-down"
	poolVersionTakesMemberDown  workflow.Version = 1
)
