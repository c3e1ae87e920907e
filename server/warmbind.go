package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
)

// warmBindFor bounds the Update of a warm bind: past it the API takes the slow path (which
// finds the lease started if the Update did land).
const warmBindFor = 10 * time.Second

// warmBind binds an admitted lease at once if its pool has a prepared Ready member: one Update
// to the pool (its id is the lease id, so a retry replays the first answer), which binds the
// member and starts the lease's workflow; then the lease's kubeconfig is minted here from the
// member's prepared credential and stored with the Bound row. It answers false when the pool did
// not bind (no prepared member, claims queued, the pool not answering): the caller starts the
// lease's workflow, which claims by signal and waits in the queue. When it answers true, status
// is the answer's: 200 with the Bound lease and its kubeconfig, or the lease as the store has it.
// A lease bound by the pool whose kubeconfig cannot be minted here (the prepared credential cannot be opened,
// the store is busy) is still bound by its workflow, which mints it: the answer is the store's
// row, Pending (202: the client polls GET /v1/leases/{id}), never 200 Bound without a
// kubeconfig — a client would take that for a lease it can use, and the API itself would find
// the row Pending (issue 39, item 2).
func (s *Server) warmBind(ctx context.Context, r *http.Request, l store.Lease, in lease.Input) (view api.Lease, status int, ok bool) {
	if s.SlowBindOnly || s.Secrets == nil {
		return api.Lease{}, 0, false
	}
	ctx = context.WithoutCancel(ctx) // a client hanging up must not leave the bind unclear
	in.SearchAttributes = s.SearchAttributes
	req := pool.BindRequest{Claim: pool.ClaimRequest{LeaseID: l.ID, Priority: in.Priority, At: time.Now()}, Lease: in}
	if s.SearchAttributes {
		req.SearchAttributes = lease.BoundSearchAttributes(in)
	}
	uctx, cancel := context.WithTimeout(ctx, warmBindFor)
	defer cancel()
	h, err := s.Temporal.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID: pool.WorkflowID(l.Pool), UpdateID: l.ID, UpdateName: pool.UpdateClaim,
		Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res pool.BindResult
	if err == nil {
		err = h.Get(uctx, &res)
	}
	if err != nil {
		s.logWarmBind("warm bind not answered: the lease takes the slow path", l.ID, r, err)
		return api.Lease{}, 0, false
	}
	if !res.Bound {
		return api.Lease{}, 0, false
	}
	admitted := l
	// The lease as its workflow starts: Bound to the pool's member from its first event.
	in.Bound = &res.Assignment
	bound := lease.NewState(in).View
	view = s.storeView(lease.Row(bound, l))
	applyWorkflowView(&view, bound)
	kc, err := s.mintBound(ctx, bound, in.MaxTTL)
	if errors.Is(err, store.ErrLeaseEnded) {
		// The lease ended (its ttl ran out, it was released) before its Bound row was
		// written: nothing was written, it stays ended, and the answer is the lease as it is.
		s.logWarmBind("warm-bound lease ended before its bind was recorded", l.ID, r, err)
		if ended, gerr := s.Store.GetLease(ctx, l.ID); gerr == nil {
			return s.storeView(ended), http.StatusOK, true
		}
		return view, http.StatusOK, true
	}
	if err != nil {
		s.logWarmBind("warm-bound lease: its kubeconfig is left to its workflow; answered as the store has it", l.ID, r, err)
		view, status = s.unmintedView(ctx, admitted)
		return view, status, true
	}
	view.Kubeconfig = string(kc)
	return view, http.StatusOK, true
}

// unmintedView is the answer to a warm bind whose kubeconfig the API could not mint: the lease
// as the store has it now (admitted if it cannot be read), and its status. Its workflow, which
// the pool starts, binds it and mints the kubeconfig (EnsureLeaseBound); until then the row is
// Pending: 202, and the client polls GET /v1/leases/{id}. A row its workflow has written Bound
// meanwhile is 200 only with the kubeconfig it stored (if this API can open it), and an ended
// row is 200 as the lease's end (as for store.ErrLeaseEnded).
func (s *Server) unmintedView(ctx context.Context, admitted store.Lease) (api.Lease, int) {
	row, err := s.Store.GetLease(ctx, admitted.ID)
	if err != nil {
		row = admitted
	}
	v := s.storeView(row)
	switch {
	case row.Phase.Ended():
		return v, http.StatusOK
	case row.Phase == api.LeaseBound:
		if kc, err := s.kubeconfig(ctx, row.ID); err == nil {
			v.Kubeconfig = kc
			return v, http.StatusOK
		}
	}
	return v, http.StatusAccepted
}

// mintBound stores the bound lease's kubeconfig (minted from its member's prepared credential, valid until
// bind + maxTtl) with its Bound row and the lease.bound event, in one transaction; the lease's
// workflow does the same if this does not happen (whoever is first wins: both hand out the
// stored kubeconfig, and the event is written once). A lease that has ended meanwhile is
// refused both writes (store.ErrLeaseEnded) and nothing is written: it is not Bound again.
func (s *Server) mintBound(ctx context.Context, bound lease.View, maxTTL time.Duration) ([]byte, error) {
	prepared, err := leasecred.Prepared(ctx, s.Store, s.Secrets, bound.InstanceID)
	if err != nil {
		return nil, err
	}
	var kc []byte
	err = s.Store.InTx(ctx, func(tx store.Store) error {
		var err error
		if kc, err = leasecred.Ensure(ctx, tx, s.Secrets, prepared, bound.ID, bound.BoundAt.Add(maxTTL)); err != nil {
			return err
		}
		return lease.RecordLeaseIn(ctx, tx, bound)
	})
	if err != nil {
		return nil, err
	}
	return kc, nil
}

func (s *Server) logWarmBind(msg, leaseID string, r *http.Request, err error) {
	if s.Logger != nil {
		s.Logger.Warn(msg, zap.String("lease", leaseID), zap.Error(err), zap.String("requestId", requestID(r)))
	}
}
