package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Activities are the lease domain's activities: the lease's store row and its credentials.
type Activities struct {
	Store  store.Store
	Logger *zap.Logger
	// Secrets seals the lease's kubeconfig before it is stored.
	Secrets *secretbox.Box
	// Host names this worker in errors; Backends are the backends it runs (credentials are
	// issued and revoked by the instance's backend).
	Host     string
	Backends map[string]backends.RuntimeBackend
	// Temporal sends leases their sleep and wake Updates for the pool's schedules (ChangeLeaseSleep).
	Temporal client.Client
}

// CredentialRequest names a lease's credential. It carries no secret: the kubeconfig goes
// from the backend, sealed, into the store, and the workflow history only sees this reference.
type CredentialRequest struct {
	LeaseID    string    `json:"leaseId"`
	Backend    string    `json:"backend"`
	InstanceID string    `json:"instanceId"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// RecordLease writes the lease's row as its view v has it (Row), keeping fields the workflow
// does not know, such as the alias the API stored, and, when the phase changes, appends the
// audit event of the transition in the same transaction: if the event cannot be written the
// row is not changed either, so the activity's retry still sees the transition and records
// both. The event is keyed by the transition, so that two attempts racing (a timed-out one
// still running) write it once.
//
// A row that has ended (Released, Expired, Failed) is not moved to another phase: the store
// refuses (store.ErrLeaseEnded), and so does this activity, without retrying, since no retry
// can succeed (ErrLeaseEnded below). The workflow's projections ignore the outcome: the row
// keeps its end, which is what the lease's holder and its quota were told.
//
// Its argument was a Record of its own up to v0.1.0, with the same JSON names as View's.
func (a *Activities) RecordLease(ctx context.Context, v View) error {
	return leaseEnded(a.Store.InTx(ctx, func(tx store.Store) error { return RecordLeaseIn(ctx, tx, v) }))
}

// ErrLeaseEnded is the non-retryable error type of an activity that would bring an ended
// lease back (its row to another phase, a credential stored for it): store.ErrLeaseEnded.
const ErrLeaseEnded = "LeaseEnded"

// leaseEnded makes store.ErrLeaseEnded a non-retryable activity error (the lease's end is
// final; retrying would only spin until the activity's retries run out, and they do not).
func leaseEnded(err error) error {
	if errors.Is(err, store.ErrLeaseEnded) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrLeaseEnded, err)
	}
	return err
}

// RecordLeaseIn is RecordLease in the caller's transaction tx (not an activity: the API binding
// a lease writes its row with its credential).
func RecordLeaseIn(ctx context.Context, tx store.Store, v View) error {
	l, err := tx.GetLease(ctx, v.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err == nil && l.Phase.Ended() && l.Phase == v.Phase {
		// Ended so already: the end first recorded stands, with its reason. A workflow that
		// started after the orphan reaper failed its row (reason orphaned) and then failed
		// itself (its bind refused) does not rewrite the reason.
		return nil
	}
	changed := l.Phase != v.Phase
	row := Row(v, l)
	if row.ExpiresAt.Equal(l.ExpiresAt) {
		row.ExpiresAt = l.ExpiresAt // the same instant, as the store read it back
	}
	if err == nil && !changed && l.Principal != "" && reflect.DeepEqual(row, l) {
		return nil // already so (a warm bind's row, written by the API): no write
	}
	if err := tx.UpsertLease(ctx, row); err != nil {
		return err
	}
	if !changed {
		return nil
	}
	_, err = tx.AppendEvent(ctx, transitionEvent(v))
	return err
}

// Row is the domain → row translation of a lease, the one place its store row is made: the
// row of the lease whose workflow's view is v, over stored (the row as the store has it, or
// what the API admits a new lease with), which keeps what only the row knows: alias, metadata,
// idempotency key, request hash, role, its times, and the principal first written. The
// workflow's projections (RecordLease), the API's admission and a warm bind's Bound row all go
// through it. Nothing translates a row back: the workflow never reads its own row.
func Row(v View, stored store.Lease) store.Lease {
	row := stored
	row.ID, row.Pool, row.Phase, row.InstanceID, row.Reason = v.ID, v.Pool, v.Phase, v.InstanceID, v.Reason
	row.TTL, row.ExpiresAt = v.TTL, v.ExpiresAt
	if row.Principal == "" {
		row.Principal = v.Principal
	}
	return row
}

// transitionEvent is the audit event of a lease's move to v.Phase (lease.bound, lease.failed…),
// keyed by the transition so that it is written once.
func transitionEvent(v View) store.Event {
	action := "lease." + strings.ToLower(string(v.Phase))
	return store.Event{Actor: "kobe", Action: action, Target: v.ID, Pool: v.Pool, Key: action + ":" + v.ID,
		Result: "ok", Detail: []byte(fmt.Sprintf(`{"pool":%q,"instance":%q,"reason":%q}`, v.Pool, v.InstanceID, v.Reason))}
}

// ActivityEnsureLeaseBound is EnsureLeaseBound's registered name (a warm-bound lease runs it
// as a local activity, by name).
const ActivityEnsureLeaseBound = "EnsureLeaseBound"

// BoundLease is EnsureLeaseBound's argument: a lease bound by its pool on a warm bind, as its
// view has it, and how long its credential may live (bind time + maxTtl), which the view does
// not hold. ("record" is v0.1.0's name of the view, a Record then.)
type BoundLease struct {
	Lease    View      `json:"record"`
	NotAfter time.Time `json:"notAfter"`
}

// EnsureLeaseBound makes sure a warm-bound lease has its credential (minted from its
// instance's prepared credential if the API did not store one) and its Bound row and event.
// A lease whose row has ended before its workflow got here (ErrLeaseEnded, not retried) is
// not bound: the workflow's failure path gives its member back.
func (a *Activities) EnsureLeaseBound(ctx context.Context, b BoundLease) error {
	if a.Secrets == nil {
		return temporal.NewNonRetryableApplicationError("this worker has no secret key: it cannot store lease credentials", "NoSecretKey", nil)
	}
	if _, err := a.Store.GetLeaseCredential(ctx, b.Lease.ID); errors.Is(err, store.ErrNotFound) {
		prepared, err := leasecred.Prepared(ctx, a.Store, a.Secrets, b.Lease.InstanceID)
		if err != nil {
			return err
		}
		if _, err := leasecred.Ensure(ctx, a.Store, a.Secrets, prepared, b.Lease.ID, b.NotAfter); err != nil {
			return leaseEnded(err)
		}
	} else if err != nil {
		return err
	}
	return a.RecordLease(ctx, b.Lease)
}

// ConditionChange is a change of one of a lease's conditions, for the audit log.
type ConditionChange struct {
	LeaseID    string             `json:"leaseId"`
	Pool       string             `json:"pool"`
	InstanceID string             `json:"instanceId"`
	Condition  api.LeaseCondition `json:"condition"`
	// At is when the change was seen (the condition's transition time stays when only its
	// reason changed).
	At time.Time `json:"at"`
}

// RecordLeaseCondition appends the audit event of a condition's change (ActionLeaseCondition),
// keyed by the change, so that a retried activity writes it once.
func (a *Activities) RecordLeaseCondition(ctx context.Context, c ConditionChange) error {
	key := fmt.Sprintf("%s:%s:%s:%s:%s:%d", ActionLeaseCondition, c.LeaseID, c.Condition.Type, c.Condition.Status,
		c.Condition.Reason, c.At.UnixMicro())
	detail, err := json.Marshal(map[string]string{"pool": c.Pool, "instance": c.InstanceID, "type": c.Condition.Type,
		"status": c.Condition.Status, "reason": string(c.Condition.Reason), "message": c.Condition.Message})
	if err != nil {
		return err
	}
	_, err = a.Store.AppendEvent(ctx, store.Event{Actor: "kobe", Action: ActionLeaseCondition, Target: c.LeaseID, Pool: c.Pool,
		Key: key, Result: "ok", Detail: detail})
	return err
}

// ErrInstanceBroken is the non-retryable error type of a credential asked of a broken instance.
const ErrInstanceBroken = "InstanceBroken"

// ErrInstanceSleeping is the non-retryable error type of a credential asked of an instance that
// is asleep: its API server is stopped until the lease wakes it, so retrying cannot help.
const ErrInstanceSleeping = "InstanceSleeping"

// IssueLeaseCredentials asks the backend for a kubeconfig for this lease expiring with it,
// seals it and stores it. It runs on the instance's host.
func (a *Activities) IssueLeaseCredentials(ctx context.Context, req CredentialRequest) error {
	if a.Secrets == nil {
		return temporal.NewNonRetryableApplicationError("this worker has no secret key: it cannot store lease credentials", "NoSecretKey", nil)
	}
	b, err := instance.Backend(a.Backends, a.Host, req.Backend)
	if err != nil {
		return err
	}
	ttl := time.Until(req.ExpiresAt)
	if ttl <= 0 {
		return temporal.NewNonRetryableApplicationError("lease already expired", "Expired", nil)
	}
	cred, err := b.Credentials(ctx, req.InstanceID, backends.CredentialRequest{User: req.LeaseID, TTL: ttl})
	if err != nil {
		// An instance its backend knows to be broken will not get better by retrying: the lease
		// fails now (and gives the instance back) instead of after minutes of retries.
		st, broken := instanceBroken(ctx, b, req.InstanceID)
		if broken {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("instance %s is broken (%s %s): %v", req.InstanceID, st.Phase, st.Message, err), ErrInstanceBroken, nil)
		}
		// Nor will one that sleeps (the lease fell asleep while this issued): it answers once
		// woken, and the lease refuses extensions until then.
		if st.Phase == backends.PhaseSleeping {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("instance %s is asleep: %v", req.InstanceID, err), ErrInstanceSleeping, nil)
		}
		return err
	}
	return leaseEnded(leasecred.Put(ctx, a.Store, a.Secrets, req.LeaseID, cred))
}

// RevokeLeaseCredentials makes the lease's credential stop working and forgets it.
func (a *Activities) RevokeLeaseCredentials(ctx context.Context, req CredentialRequest) error {
	b, err := instance.Backend(a.Backends, a.Host, req.Backend)
	if err != nil {
		return err
	}
	if err := b.RevokeCredentials(ctx, req.InstanceID, req.LeaseID); err != nil && !errors.Is(err, backends.ErrNotFound) {
		// A broken or sleeping instance cannot be asked to revoke, and it is torn down right
		// after: waiting for it would hold the lease (and its instance) for the activity's
		// whole retry window.
		if st, broken := instanceBroken(ctx, b, req.InstanceID); !broken && st.Phase != backends.PhaseSleeping {
			return err
		}
	}
	return a.Store.DeleteLeaseCredential(ctx, req.LeaseID)
}

// instanceBroken says whether the backend knows the instance to be broken or gone.
func instanceBroken(ctx context.Context, b backends.RuntimeBackend, id string) (backends.InstanceStatus, bool) {
	st, err := b.Status(ctx, id)
	if errors.Is(err, backends.ErrNotFound) {
		return st, true
	}
	return st, err == nil && (st.Phase == backends.PhaseUnhealthy || st.Phase == backends.PhaseFailed || st.Phase == backends.PhaseGone)
}
