// Package poolresource is the controller of ClusterPool resources: a ClusterPool created,
// changed or deleted in a Kubernetes API server applies, changes or deletes the kobe pool of
// its name through the same path as PUT and DELETE /v1/pools/{name} (server.ApplyPool,
// server.DeletePool), and the resource's status follows the pool. One kobe process at a time
// runs it (leader election on a Lease object). docs/gitops.md says how it behaves.
//
// What to do for a resource and its pool is decided here, by pure functions (decide,
// statusOf, lastWriter); controller.go carries the decisions out.
package poolresource

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
)

// Finalizer holds a ClusterPool until its pool has drained and is gone.
const Finalizer = "kobe.kunobi.ninja/pool"

// FieldManager is the controller's name in the resources' managedFields.
const FieldManager = "kobe-controller"

// DefaultActor is the audit log's actor of a change when the resource's managedFields name no
// other writer.
const DefaultActor = "controller"

// ManagedBy is what a pool's row records as its manager: the resource's kind and name.
func ManagedBy(name string) string { return "ClusterPool/" + name }

// Condition types and reasons of a ClusterPool's status.
const (
	// ConditionApplied: the resource's spec (of status.observedGeneration) is the pool's.
	ConditionApplied = "Applied"
	// ConditionReady: the pool has its warm target of ready members.
	ConditionReady = "Ready"

	ReasonApplied     = "Applied"     // Applied=True
	ReasonRefused     = "Refused"     // Applied=False: kobe refused the spec (the message says why)
	ReasonApplyFailed = "ApplyFailed" // Applied=False: kobe could not apply it now; it tries again
	ReasonWarm        = "WarmTargetReached"
	ReasonWarming     = "BelowWarmTarget"
	ReasonNoPool      = "NoPool" // Ready=False before the pool exists (or after it is gone)
)

// action is what the controller does next for a resource.
type action int

const (
	actNothing         action = iota // the pool is the resource's: only the status follows it
	actAddFinalizer                  // first of all, so that no pool is made that a delete could miss
	actApply                         // the resource's spec is not (yet) the pool's
	actDelete                        // the resource is being deleted: drain the pool
	actWaitDrain                     // the pool is draining: wait until it is gone
	actRemoveFinalizer               // the pool is gone (or was never this resource's)
)

func (a action) String() string {
	return [...]string{"nothing", "add finalizer", "apply", "delete pool", "wait for drain", "remove finalizer"}[a]
}

// observed is what the controller knows of a resource and its pool when it decides.
type observed struct {
	Deleting     bool // the resource has a deletion timestamp
	HasFinalizer bool
	Generation   int64 // the resource's metadata.generation
	// RefusedGeneration is the generation whose spec kobe refused (0: none): it is not tried
	// again until the spec changes.
	RefusedGeneration int64

	PoolExists bool
	// PoolManagedBy is the pool row's manager ("" for a pool applied through the API).
	PoolManagedBy string
	// SameSpec: the pool's applied manifest is the resource's.
	SameSpec bool
	// DeleteSent: this pool (its current row) was already told to drain.
	DeleteSent bool
}

// decide is what to do next for a resource named name.
func decide(name string, o observed) action {
	ours := o.PoolExists && o.PoolManagedBy == ManagedBy(name)
	if o.Deleting {
		switch {
		case !o.HasFinalizer:
			return actNothing // not ours to hold (or already released)
		case ours && o.DeleteSent:
			return actWaitDrain
		case ours:
			return actDelete
		default:
			// No pool, or one the resource never managed (applied through the API, the
			// resource's spec refused): nothing of the resource's to drain.
			return actRemoveFinalizer
		}
	}
	if !o.HasFinalizer {
		return actAddFinalizer
	}
	if ours && o.SameSpec {
		return actNothing
	}
	if o.RefusedGeneration == o.Generation {
		return actNothing
	}
	return actApply
}

// applyOutcome is the result of the controller's last apply of a generation.
type applyOutcome struct {
	Generation int64
	Refused    bool   // kobe refused the spec
	Failed     bool   // kobe could not apply it now
	Message    string // why (refused or failed)
}

// statusOf is the resource's status: the pool's view (found false: no pool of the name),
// the outcome of the latest apply, the status it has now (whose conditions keep their
// transition times while unchanged) and the time of this observation.
func statusOf(prev v1alpha1.ClusterPoolStatus, view api.PoolView, found bool, outcome applyOutcome, now time.Time) v1alpha1.ClusterPoolStatus {
	st := v1alpha1.ClusterPoolStatus{Conditions: append([]metav1.Condition(nil), prev.Conditions...),
		ObservedGeneration: prev.ObservedGeneration, Phase: string(api.PoolUnknown)}
	if found {
		st.Phase = phaseOf(view.Phase)
		st.Ready, st.Leased, st.Creating, st.Recycling = view.Ready, view.Leased, view.Creating, view.Recycling
		st.Unhealthy, st.Quarantined, st.Outdated, st.QueueDepth = view.Unhealthy, view.Quarantined, view.Outdated, view.QueueDepth
		st.ConsecutiveFailures, st.LastFailureReason = view.ConsecutiveFailures, view.LastFailureReason
		if view.NextAttemptAt != nil {
			t := metav1.NewTime(*view.NextAttemptAt).Rfc3339Copy()
			st.NextAttemptAt = &t
		}
	}
	set := func(typ string, generation int64, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		// Times to the second, as the API server keeps them: a status that only differs from
		// the stored one in nanoseconds is not a change.
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now).Rfc3339Copy()})
	}
	switch {
	case outcome.Generation == 0:
		// Nothing applied or refused by this controller yet: the applied condition stays.
	case outcome.Refused:
		st.ObservedGeneration = outcome.Generation
		set(ConditionApplied, outcome.Generation, false, ReasonRefused, outcome.Message)
	case outcome.Failed:
		set(ConditionApplied, outcome.Generation, false, ReasonApplyFailed, outcome.Message)
	default:
		st.ObservedGeneration = outcome.Generation
		set(ConditionApplied, outcome.Generation, true, ReasonApplied, fmt.Sprintf("generation %d is the pool's spec", outcome.Generation))
	}
	switch {
	case !found:
		set(ConditionReady, st.ObservedGeneration, false, ReasonNoPool, "kobe has no pool of this name")
	case view.Ready >= view.Policy.WarmTarget:
		set(ConditionReady, st.ObservedGeneration, true, ReasonWarm, fmt.Sprintf("%d ready, warm target %d", view.Ready, view.Policy.WarmTarget))
	default:
		set(ConditionReady, st.ObservedGeneration, false, ReasonWarming, fmt.Sprintf("%d ready, warm target %d (phase %s)", view.Ready, view.Policy.WarmTarget, st.Phase))
	}
	return st
}

// phaseOf is a pool's phase as the resource's schema takes it: a phase the schema does not
// list (none today) is Unknown rather than a status the API server would refuse.
func phaseOf(p api.PoolPhase) string {
	switch p {
	case api.PoolHealthy, api.PoolScalingUp, api.PoolScalingDown, api.PoolBackoff, api.PoolFailing,
		api.PoolIdle, api.PoolDraining:
		return string(p)
	}
	return string(api.PoolUnknown)
}

// refusedGeneration is the generation whose spec the status says kobe refused (0: none).
func refusedGeneration(st v1alpha1.ClusterPoolStatus) int64 {
	c := meta.FindStatusCondition(st.Conditions, ConditionApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonRefused {
		return 0
	}
	return c.ObservedGeneration
}

// lastWriter is the audit log's actor of a change of the resource: the field manager of the
// latest write to the resource itself (not its status) by someone other than the controller
// ("kubectl-client-side-apply", "argocd-controller", …). Kubernetes records managers, not
// users: the manager is the closest to "who" the resource tells. DefaultActor when none.
func lastWriter(fields []metav1.ManagedFieldsEntry) string {
	actor := DefaultActor
	var latest time.Time
	for _, f := range fields {
		if f.Subresource != "" || f.Manager == FieldManager || f.Manager == "" || f.Time == nil {
			continue
		}
		if t := f.Time.Time; actor == DefaultActor || t.After(latest) {
			actor, latest = f.Manager, t
		}
	}
	return actor
}
