package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
	"github.com/kunobi-ninja/kobe/pool"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// Request limits (upstream's where it has them).
const (
	maxBodyBytes       = 64 << 10
	maxMetadataBytes   = 8 << 10
	maxMetadataKeys    = 32
	maxIdempotencyKey  = 253
	maxPriority        = 1000
	maxLongPoll        = 60 * time.Second
	minIdleTimeout     = 10 * time.Second
	resourceKindLease  = "Cluster"
	resourceKindPool   = "Cluster" // upstream: a pool is described by what it leases
	leaseNotFoundError = "Lease not found"
)

var aliasRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidateLeaseRequest checks a create request's fields; the error names the field.
func ValidateLeaseRequest(req api.LeaseRequest) error {
	_, _, err := leaseRequest(req)
	return err
}

// leaseRequest is the wire → domain translation of POST /v1/leases, the one place it is made:
// the body checked field by field (the error names the field) and made into the start input of
// its lease — all of it but what its admission sets: its id, its principal and the terms its
// pool grants it — and into what it asks of those terms (poolspec.Policy.LeaseTerms). The pool
// is named by pool or profile (upstream's name). The alias, metadata and idempotency key are
// the store row's too (admissionRow).
func leaseRequest(req api.LeaseRequest) (lease.Input, poolspec.LeaseAsk, error) {
	in := lease.Input{Pool: req.Pool, Priority: req.Priority}
	ask := poolspec.LeaseAsk{Alias: req.Alias, Metadata: req.Metadata}
	switch {
	case req.Pool == "" && req.Profile == "":
		return in, ask, errors.New("pool: required (or profile, its upstream name)")
	case req.Pool != "" && req.Profile != "" && req.Pool != req.Profile:
		return in, ask, fmt.Errorf("pool %q and profile %q differ; give one, or the same in both", req.Pool, req.Profile)
	case req.Pool == "":
		in.Pool = req.Profile
	}
	if len(in.Pool) > 63 || !aliasRE.MatchString(in.Pool) {
		return in, ask, fmt.Errorf("pool: %q is not a pool name", in.Pool)
	}
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return in, ask, fmt.Errorf("ttl: %q is not a positive duration (e.g. 30m, 2h)", req.TTL)
		}
		if d < api.MinLeaseTTL {
			// A lease must outlive its own bind (api.MinLeaseTTL).
			return in, ask, fmt.Errorf("ttl: %q is shorter than the minimum of %s", req.TTL, api.MinLeaseTTL)
		}
		ask.TTL = d
	}
	if req.IdleTimeout != "" {
		d, err := time.ParseDuration(req.IdleTimeout)
		if err != nil || d < minIdleTimeout {
			return in, ask, fmt.Errorf("idleTimeout: %q is not a duration of at least %s", req.IdleTimeout, minIdleTimeout)
		}
		in.IdleTimeout = d
	}
	if err := checkLeaseLabels(req); err != nil {
		return in, ask, err
	}
	if req.Priority < -maxPriority || req.Priority > maxPriority {
		return in, ask, fmt.Errorf("priority: %d is outside [-%d, %d]", req.Priority, maxPriority, maxPriority)
	}
	return in, ask, nil
}

// checkLeaseLabels checks what a create request says of the lease for its holder alone: its
// alias, metadata and idempotency key.
func checkLeaseLabels(req api.LeaseRequest) error {
	if req.Alias != "" && !aliasRE.MatchString(req.Alias) {
		return fmt.Errorf("alias: %q must be a DNS label (lower-case letters, digits, '-'; at most 63)", req.Alias)
	}
	if strings.HasPrefix(req.Alias, "lease-") {
		return fmt.Errorf("alias: %q must not start with lease- (that is how lease ids start)", req.Alias)
	}
	if len(req.Metadata) > maxMetadataKeys {
		return fmt.Errorf("metadata: %d keys, at most %d", len(req.Metadata), maxMetadataKeys)
	}
	size := 0
	for k, v := range req.Metadata {
		if k == "" {
			return errors.New("metadata: empty key")
		}
		size += len(k) + len(v)
	}
	if size > maxMetadataBytes {
		return fmt.Errorf("metadata: %d bytes, at most %d", size, maxMetadataBytes)
	}
	if len(req.IdempotencyKey) > maxIdempotencyKey {
		return fmt.Errorf("idempotencyKey: %d bytes, at most %d", len(req.IdempotencyKey), maxIdempotencyKey)
	}
	return nil
}

// requestHash identifies a create request's meaning, for idempotent replays: the lease's pool,
// priority and idle timeout (in) and what it asked (ask). Its bytes are those of v0.1.0, so
// that a retry across an upgrade still replays.
func requestHash(in lease.Input, ask poolspec.LeaseAsk) string {
	b, _ := json.Marshal(struct {
		Pool, TTL, Alias, Idle string
		Metadata               map[string]string
		Priority               int
	}{in.Pool, ask.TTL.String(), ask.Alias, in.IdleTimeout.String(), ask.Metadata, in.Priority})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// admissionRow is the store row a new lease is admitted with: its workflow's first view
// (lease.Row, the domain → row translation) over what only the row keeps of the request.
func admissionRow(in lease.Input, ask poolspec.LeaseAsk, role string, req api.LeaseRequest) store.Lease {
	return lease.Row(lease.NewState(in).View, store.Lease{Role: role, Alias: req.Alias, Metadata: req.Metadata,
		IdempotencyKey: req.IdempotencyKey, RequestHash: requestHash(in, ask)})
}

// poolPolicy reads a pool's declared policy from the store (policyOf).
func (s *Server) poolPolicy(ctx context.Context, name string) (poolspec.Policy, error) {
	p, err := s.Store.GetPool(ctx, name)
	if err != nil {
		return poolspec.Policy{}, err
	}
	return s.policyOf(p)
}

// policyOf is the policy of the pool whose store row is p: poolspec's derivation of its
// manifest (ParseStored), kept by the row's generation so that a lease create parses and
// validates the manifest only after an apply. The server reads a pool's policy nowhere else;
// what a lease takes of it are its terms, derived by poolspec too (admit).
func (s *Server) policyOf(p store.Pool) (poolspec.Policy, error) {
	if pol, ok := s.policies.get(p.Name, p.Generation); ok {
		return pol, nil
	}
	pol, err := poolspec.ParseStored(p.Spec)
	if err != nil {
		return pol, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	s.policies.put(p.Name, p.Generation, pol)
	return pol, nil
}

func (s *Server) handleLeaseCreate(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	var req api.LeaseRequest
	if !decodeBody(w, r, &req) {
		return
	}
	in, ask, err := leaseRequest(req)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	ctx := r.Context()
	pol, err := s.poolPolicy(ctx, in.Pool)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "Pool not found", fmt.Sprintf("no pool named %q", in.Pool))
		return
	}
	if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	role, _ := s.Policy.RoleOf(p)
	if in.LeaseTerms, err = admit(pol, p, role, ask); err != nil {
		writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden", err.Error())
		return
	}
	in.LeaseID, in.Principal, in.ContinueAsNewAfter = newID("lease-"), p.Name, s.ContinueAsNewAfter

	// The admission and its event are one transaction: no lease without its lease.create.
	var admitted store.Lease
	var replayed bool
	err = s.Store.InTx(ctx, func(tx store.Store) error {
		var err error
		admitted, replayed, err = tx.AdmitLease(ctx, store.AdmitRequest{
			Lease:           admissionRow(in, ask, p.Role, req),
			MaxPerPrincipal: role.MaxConcurrentLeases,
			MaxPerRole:      role.Quota,
		})
		if err != nil || replayed {
			return err
		}
		_, err = tx.AppendEvent(ctx, s.auditEvent(r, "lease.create", admitted.ID, in.Pool, "accepted",
			map[string]any{"ttl": in.TTL.String(), "alias": req.Alias}))
		return err
	})
	if err != nil {
		s.refuseAdmission(w, r, in.Pool, req, err)
		return
	}
	in.LeaseID = admitted.ID // a replay's is the first request's
	if replayed {
		s.answerReplayed(w, r, admitted, in)
		return
	}
	if view, status, ok := s.warmBind(ctx, r, admitted, in); ok {
		writeJSON(w, status, view)
		return
	}
	if err := s.startLeaseSurely(ctx, in); err != nil {
		s.failUnstartedLease(r, admitted)
		s.unavailable(w, r, "starting the lease", err)
		return
	}
	view := s.storeView(admitted)
	view.QueuePosition = s.queuePosition(ctx, in.Pool, admitted.ID)
	writeJSON(w, http.StatusAccepted, view)
}

// refuseAdmission answers a lease the store did not admit, err saying why.
func (s *Server) refuseAdmission(w http.ResponseWriter, r *http.Request, pool string, req api.LeaseRequest, err error) {
	var qe *store.QuotaError
	switch {
	case errors.As(err, &qe):
		if err := s.audit(r, "lease.create", "", pool, "refused", map[string]any{"reason": api.ReasonQuotaExhausted, "scope": qe.Scope, "used": qe.Used, "limit": qe.Limit}); err != nil {
			s.auditFailed(w, r, "recording the refusal of the lease", err)
			return
		}
		writeError(w, http.StatusTooManyRequests, api.ReasonQuotaExhausted, "Quota exhausted", quotaDetail(qe))
	case errors.Is(err, store.ErrIdempotencyConflict):
		writeError(w, http.StatusConflict, api.ReasonIdempotencyConflict, "Idempotency conflict",
			"idempotencyKey "+req.IdempotencyKey+" was used with a different request")
	case errors.Is(err, store.ErrAliasTaken):
		writeError(w, http.StatusConflict, api.ReasonAliasTaken, "Alias taken", fmt.Sprintf("you hold an active lease named %q", req.Alias))
	case errors.Is(err, store.ErrAuditWrite):
		s.auditFailed(w, r, "admitting the lease", err)
	default:
		s.unavailable(w, r, "admitting the lease", err)
	}
}

// answerReplayed answers a create retried with its idempotency key: the lease it admitted
// first. If that request stopped between the lease's admission and its start (a crash, a lost
// answer), this one finishes the job with the same ids, so it can start nothing twice (the
// Update's id and the workflow's id are the lease id).
func (s *Server) answerReplayed(w http.ResponseWriter, r *http.Request, admitted store.Lease, in lease.Input) {
	ctx := r.Context()
	w.Header().Set(api.HeaderIdempotentReplay, "true")
	if admitted.Phase == api.LeasePending && !s.leaseRuns(ctx, admitted.ID) {
		in.TTL = admitted.TTL
		if view, status, ok := s.warmBind(ctx, r, admitted, in); ok {
			writeJSON(w, status, view)
			return
		}
		if err := s.startLeaseSurely(ctx, in); err != nil {
			s.unavailable(w, r, "starting the lease", err)
			return
		}
	}
	view, err := s.leaseView(ctx, admitted, true)
	if err != nil {
		s.unavailable(w, r, "reading the lease", err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// failUnstartedLease records Failed a lease whose workflow did not start, so that it holds no
// quota; if that write fails too, the orphan reaper fails it later.
func (s *Server) failUnstartedLease(r *http.Request, admitted store.Lease) {
	admitted.Phase, admitted.Reason = api.LeaseFailed, api.ReasonBackendError
	wctx := context.WithoutCancel(r.Context())
	if ferr := s.Store.InTx(wctx, func(tx store.Store) error {
		if err := tx.UpsertLease(wctx, admitted); err != nil {
			return err
		}
		_, err := tx.AppendEvent(wctx, s.auditEvent(r, "lease.create", admitted.ID, admitted.Pool, "failed", map[string]any{"reason": api.ReasonBackendError}))
		return err
	}); ferr != nil && s.Logger != nil {
		s.Logger.Error("a lease whose workflow did not start stays Pending: recording it Failed failed",
			zap.String("lease", admitted.ID), zap.Error(ferr), zap.String("requestId", requestID(r)))
	}
}

// defaultLeaseStartGrace bounds how long a request to a warm-bound lease waits for its workflow.
const defaultLeaseStartGrace = 10 * time.Second

// untilLeaseRuns runs op (a signal or an Update to the lease's workflow) and, while it finds no
// workflow for a lease the store has Bound, tries again for up to LeaseStartGrace. A warm bind
// answers Bound from the pool's Update; the lease's own workflow, a child the pool starts in the
// same workflow task, lands a moment later — on a loaded engine, many seconds later. A lease that
// has ended is not Bound in the store (it projects its end before it completes), so a lease the
// store has Bound and whose workflow is not there after the grace has not started yet (or was
// terminated by hand): that is errLeaseNotStarted, never the workflow's NotFound, which the
// handlers take for a lease that ended — a release answered 204 and then lost, its cluster held
// for the lease's whole TTL (seen in `make bench` at 50 clients, 4 December 2026). The same
// holds for a row still Pending: a warm bind whose kubeconfig the API could not mint leaves the
// row Pending while the pool starts the workflow, and a request racing an admission's start
// comes before it too (issue 39, item 2).
func (s *Server) untilLeaseRuns(ctx context.Context, l store.Lease, op func() error) error {
	err := op()
	if !l.Phase.Active() {
		return err
	}
	grace := s.LeaseStartGrace
	if grace <= 0 {
		grace = defaultLeaseStartGrace
	}
	deadline := time.Now().Add(grace)
	for pause := 5 * time.Millisecond; isNotFound(err) && time.Now().Before(deadline); pause = min(2*pause, 500*time.Millisecond) {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		if s.leaseRuns(ctx, l.ID) {
			// Running, or ended meanwhile: op's own answer says which.
			return op()
		}
	}
	if isNotFound(err) {
		return fmt.Errorf("%w (waited %s)", errLeaseNotStarted, grace)
	}
	return err
}

// errLeaseNotStarted: a lease is Pending or Bound in the store but its workflow does not exist yet.
var errLeaseNotStarted = errors.New("the lease's workflow has not started yet; try again")

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// leaseRuns says whether the lease's workflow exists (running or ended).
func (s *Server) leaseRuns(ctx context.Context, leaseID string) bool {
	_, err := s.Temporal.DescribeWorkflowExecution(ctx, leasestart.WorkflowID(leaseID), "")
	var nf *serviceerror.NotFound
	return !errors.As(err, &nf)
}

func quotaDetail(qe *store.QuotaError) string {
	if qe.Scope == "role" {
		return fmt.Sprintf("role %s holds %d of its %d concurrent leases; wait for one to end", qe.Name, qe.Used, qe.Limit)
	}
	return fmt.Sprintf("principal %s holds %d of %d concurrent leases; release one (kobe lease list)", qe.Name, qe.Used, qe.Limit)
}

// storeView is the row → wire translation of a lease: the lease as the store has it (a list, a
// lease whose workflow does not answer); applyWorkflowView lays the workflow's view over it.
func (s *Server) storeView(l store.Lease) api.Lease {
	v := api.Lease{ID: l.ID, ResourceKind: resourceKindLease, Phase: l.Phase, Profile: l.Pool, Pool: l.Pool,
		EffectiveTTL: l.TTL.String(), Alias: l.Alias, Metadata: l.Metadata, Owner: l.Principal, Reason: l.Reason,
		ClusterName: l.InstanceID, CreatedAt: l.CreatedAt, Conditions: []api.LeaseCondition{}}
	if !l.ExpiresAt.IsZero() {
		t := l.ExpiresAt
		v.ExpiresAt = &t
	}
	v.Capabilities = leaseCapabilities(v.Phase, false)
	return v
}

// leaseCapabilities are the operations open to a lease's holder in a phase; a sleeping lease
// is neither read nor extended until it wakes (409 sleeping).
func leaseCapabilities(phase api.LeasePhase, sleeping bool) []string {
	switch {
	case phase == api.LeasePending:
		return []string{CapRelease}
	case phase == api.LeaseBound && sleeping:
		return []string{CapRelease}
	case phase == api.LeaseBound:
		return []string{CapKubeconfig, CapExtend, CapRelease}
	}
	return []string{}
}

// sleepingDetail says why a sleeping lease refuses what (ReasonSleeping), and how to wake it.
func sleepingDetail(leaseID, what string) string {
	return "the lease's cluster is asleep (or a sleep or wake of it is under way): " + what +
		" until it wakes; wake it with `kobe lease wake " + leaseID + "` (POST /v1/leases/" + leaseID + "/wake), then try again"
}

// leaseView is the lease as it is now: the workflow's view while it runs (the store may lag by
// a projection), the store's afterwards; with the kubeconfig once Bound if asked.
func (s *Server) leaseView(ctx context.Context, l store.Lease, withKubeconfig bool) (api.Lease, error) {
	return s.leaseViewFrom(ctx, l, nil, withKubeconfig)
}

// leaseViewFrom is leaseView with the workflow's view already in hand (nil: ask the workflow).
func (s *Server) leaseViewFrom(ctx context.Context, l store.Lease, lv *lease.View, withKubeconfig bool) (api.Lease, error) {
	v := s.storeView(l)
	if lv == nil {
		lv = s.queryLease(ctx, l.ID)
	}
	if lv != nil {
		applyWorkflowView(&v, *lv)
	}
	if v.Phase == api.LeasePending {
		v.QueuePosition = s.queuePosition(ctx, l.Pool, l.ID)
	}
	if withKubeconfig && v.Phase == api.LeaseBound {
		kc, err := s.kubeconfig(ctx, l.ID)
		if err != nil {
			return v, err
		}
		v.Kubeconfig = kc
	}
	return v, nil
}

// applyWorkflowView is the domain → wire translation of a lease: its workflow's view lv laid
// over v, the lease as its store row has it (storeView). What the row alone knows (alias,
// metadata, owner, creation time) and what the handler adds (queue position, kubeconfig) are
// not the view's.
func applyWorkflowView(v *api.Lease, lv lease.View) {
	v.Phase, v.Reason, v.ClusterName, v.Endpoint, v.Extensions = lv.Phase, lv.Reason, lv.InstanceID, lv.Endpoint, lv.Extensions
	v.Sleeping = lv.Sleeping
	if !lv.BoundAt.IsZero() {
		t := lv.BoundAt
		v.BoundAt = &t
	}
	if !lv.ExpiresAt.IsZero() {
		t := lv.ExpiresAt
		v.ExpiresAt = &t
	}
	v.Capabilities = leaseCapabilities(v.Phase, lv.Sleeping)
	v.Conditions = append([]api.LeaseCondition{}, lv.Conditions...)
}

func (s *Server) kubeconfig(ctx context.Context, leaseID string) (string, error) {
	if s.Secrets == nil {
		return "", errors.New("this server has no secret key (--secret-key-file) to open lease credentials")
	}
	kc, err := leasecred.Kubeconfig(ctx, s.Store, s.Secrets, leaseID)
	if err != nil {
		return "", err
	}
	return string(kc), nil
}

// queuePosition is the lease's 1-based place in its pool's queue, 0 when not queued.
func (s *Server) queuePosition(ctx context.Context, poolName, leaseID string) int {
	resp, err := s.Temporal.QueryWorkflow(ctx, pool.WorkflowID(poolName), "", pool.QueryPoolStatus)
	if err != nil {
		return 0
	}
	var st pool.Status
	if resp.Get(&st) != nil {
		return 0
	}
	for i, id := range st.Queue {
		if id == leaseID {
			return i + 1
		}
	}
	return 0
}

// ownLease finds the caller's lease by id or alias; anything else (another principal's lease
// included) is the same 404, so that lease ids cannot be probed.
func (s *Server) ownLease(w http.ResponseWriter, r *http.Request) (store.Lease, bool) {
	p := principalOf(r)
	key := r.PathValue("id")
	var l store.Lease
	var err error
	if strings.HasPrefix(key, "lease-") {
		l, err = s.Store.GetLease(r.Context(), key)
	} else {
		var ls []store.Lease
		ls, err = s.Store.ListLeases(r.Context(), store.LeaseFilter{Principal: p.Name, Alias: key})
		err = errors.Join(err, func() error {
			if err == nil && len(ls) == 0 {
				return store.ErrNotFound
			}
			return nil
		}())
		if err == nil {
			l = newestActive(ls)
		}
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && l.Principal != p.Name) {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, leaseNotFoundError, "")
		return l, false
	}
	if err != nil {
		s.unavailable(w, r, "reading the lease", err)
		return l, false
	}
	return l, true
}

// newestActive prefers an active lease of an alias, then the newest.
func newestActive(ls []store.Lease) store.Lease {
	best := ls[0]
	for _, l := range ls[1:] {
		bestActive := best.Phase == api.LeasePending || best.Phase == api.LeaseBound
		active := l.Phase == api.LeasePending || l.Phase == api.LeaseBound
		if (active && !bestActive) || (active == bestActive && l.CreatedAt.After(best.CreatedAt)) {
			best = l
		}
	}
	return best
}

func (s *Server) handleLeaseGet(w http.ResponseWriter, r *http.Request) {
	l, ok := s.ownLease(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	var lv *lease.View
	if ws := r.URL.Query().Get("wait"); ws != "" {
		d, err := time.ParseDuration(ws)
		if err != nil || d < 0 {
			badRequest(w, fmt.Sprintf("wait: %q is not a duration (e.g. 30s)", ws))
			return
		}
		lv = s.waitBound(ctx, l.ID, min(d, maxLongPoll))
	}
	if lv == nil {
		lv = s.queryLease(ctx, l.ID)
	}
	// The holder reading its lease is activity (spec.sleep.afterInactivity).
	s.noteLeaseActivity(ctx, l.ID, lv)
	view, err := s.leaseViewFrom(ctx, l, lv, true)
	if err != nil {
		s.unavailable(w, r, "reading the lease", err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// waitBound long-polls: it returns once the lease is no longer Pending or after d, with the
// workflow's view when the wait ended that way (the caller need not ask again), else nil.
func (s *Server) waitBound(ctx context.Context, leaseID string, d time.Duration) *lease.View {
	if d <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	h, err := s.Temporal.UpdateWorkflow(wctx, clientUpdate(leaseID, lease.UpdateWaitBound))
	if err != nil {
		return nil
	}
	var lv lease.View
	if h.Get(wctx, &lv) != nil {
		return nil
	}
	return &lv
}

func (s *Server) handleLeaseKubeconfig(w http.ResponseWriter, r *http.Request) {
	l, ok := s.ownLease(w, r)
	if !ok {
		return
	}
	lv := s.queryLease(r.Context(), l.ID)
	if lv != nil && lv.Phase == api.LeaseBound && lv.Sleeping {
		// The workflow's view says so (the store does not know of sleep): its kubeconfig's
		// requests are refused until it wakes, so the holder is told now, not by kubectl.
		writeError(w, http.StatusConflict, api.ReasonSleeping, "Lease asleep", sleepingDetail(l.ID, "its kubeconfig is not handed out"))
		return
	}
	s.noteLeaseActivity(r.Context(), l.ID, lv) // fetching the kubeconfig is activity
	view, err := s.leaseViewFrom(r.Context(), l, lv, true)
	if err != nil {
		s.unavailable(w, r, "reading the lease", err)
		return
	}
	if view.Phase != api.LeaseBound {
		writeError(w, http.StatusConflict, api.ReasonNotReady, "Lease not bound", "the lease is "+string(view.Phase))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = io.WriteString(w, view.Kubeconfig)
}

func (s *Server) handleLeaseList(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	f := store.LeaseFilter{Principal: p.Name, Alias: r.URL.Query().Get("alias"), Phases: api.ActiveLeasePhases}
	if r.URL.Query().Get("all") == "true" {
		f.Phases = nil
	}
	ls, err := s.Store.ListLeases(r.Context(), f)
	if err != nil {
		s.unavailable(w, r, "listing leases", err)
		return
	}
	out := []api.Lease{}
	for _, l := range ls {
		out = append(out, s.storeView(l))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleLeaseExtend(w http.ResponseWriter, r *http.Request) {
	l, ok := s.ownLease(w, r)
	if !ok {
		return
	}
	var req api.ExtendRequest
	if !decodeBody(w, r, &req) {
		return
	}
	raw := req.ExtendTTL
	if raw == "" {
		raw = req.ExtendTTLSnake
	}
	by, err := time.ParseDuration(raw)
	if err != nil || by <= 0 {
		badRequest(w, fmt.Sprintf("extendTtl: %q is not a positive duration (e.g. 30m)", raw))
		return
	}
	if l.Phase != api.LeasePending && l.Phase != api.LeaseBound {
		writeError(w, http.StatusConflict, api.ReasonNotReady, "Lease not extendable", "the lease is "+string(l.Phase))
		return
	}
	// The update cannot be taken back: its request is recorded first, its outcome after.
	if err := s.audit(r, "lease.extend", l.ID, l.Pool, "requested", map[string]any{"by": by.String()}); err != nil {
		s.auditFailed(w, r, "extending the lease", err)
		return
	}
	var res lease.ExtendResult
	err = s.untilLeaseRuns(r.Context(), l, func() error {
		h, err := s.Temporal.UpdateWorkflow(r.Context(), clientUpdate(l.ID, lease.UpdateExtend, lease.ExtendRequest{By: by}))
		if err == nil {
			err = h.Get(r.Context(), &res)
		}
		return err
	})
	if reason, rejected := lease.IsExtendRejection(err); rejected {
		s.auditOutcome(r, "lease.extend", l.ID, l.Pool, "refused", map[string]any{"reason": reason, "by": by.String()})
		status := http.StatusConflict
		if reason == api.ReasonInvalidRequest {
			status = http.StatusBadRequest
		}
		detail := extendDetail(reason)
		if reason == api.ReasonSleeping {
			detail = sleepingDetail(l.ID, "its cluster cannot issue the extension's credential, so it is not extended")
		}
		writeError(w, status, reason, "Extension refused", detail)
		return
	}
	if broken, ok := lease.IsInstanceBroken(err); ok {
		// The new credential cannot be issued by a cluster that died: retrying cannot help, and
		// kobe itself did not fail (so not 503 degraded). The lease keeps its expiry and budget;
		// the pool's health check recycles the cluster and the lease's condition says so.
		s.auditOutcome(r, "lease.extend", l.ID, l.Pool, "refused", map[string]any{"reason": api.ReasonHealthFailed, "by": by.String(), "error": broken})
		writeError(w, http.StatusConflict, api.ReasonHealthFailed, "Extension refused",
			"the lease's cluster is broken, its new credential could not be issued ("+broken+"); nothing was changed")
		return
	}
	if err != nil {
		s.auditOutcome(r, "lease.extend", l.ID, l.Pool, "failed", map[string]any{"by": by.String(), "error": err.Error()})
		if isNotRunning(err) {
			writeError(w, http.StatusConflict, api.ReasonNotReady, "Lease not extendable", "the lease has ended")
			return
		}
		s.unavailable(w, r, "extending the lease", err)
		return
	}
	s.auditOutcome(r, "lease.extend", l.ID, l.Pool, "ok", map[string]any{"by": by.String(), "expiresAt": res.ExpiresAt})
	writeJSON(w, http.StatusOK, api.ExtendResponse{ExpiresAt: res.ExpiresAt})
}

func extendDetail(reason api.ReasonCode) string {
	switch reason {
	case api.ReasonExtensionBudgetExhausted:
		return "the lease has used all the extensions its pool and role allow"
	case api.ReasonMaxTTLCeiling:
		return "the extension would take the lease past maxTtl from its bind time"
	case api.ReasonNotReady:
		return "the lease is not Bound yet"
	}
	return string(reason)
}

func (s *Server) handleLeaseRelease(w http.ResponseWriter, r *http.Request) {
	l, ok := s.ownLease(w, r)
	if !ok {
		return
	}
	// The signal cannot be taken back: the request is recorded first (the lease's own
	// lease.released follows from the workflow).
	if err := s.audit(r, "lease.release", l.ID, l.Pool, "requested", nil); err != nil {
		s.auditFailed(w, r, "releasing the lease", err)
		return
	}
	err := s.untilLeaseRuns(r.Context(), l, func() error {
		return s.Temporal.SignalWorkflow(r.Context(), leasestart.WorkflowID(l.ID), "", lease.SignalReleaseLease, nil)
	})
	if err != nil && !isNotRunning(err) {
		s.auditOutcome(r, "lease.release", l.ID, l.Pool, "failed", map[string]any{"error": err.Error()})
		s.unavailable(w, r, "releasing the lease", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleLeaseHeartbeat(w http.ResponseWriter, r *http.Request) {
	l, ok := s.ownLease(w, r)
	if !ok {
		return
	}
	// Only a lease with an idle timeout or an inactivity limit needs its heartbeats: signalling
	// any other would grow its history for nothing. The lease's own view says whether it has one; when the lease cannot
	// be asked, the heartbeat is sent, as it costs little.
	if resp, err := s.Temporal.QueryWorkflow(r.Context(), leasestart.WorkflowID(l.ID), "", lease.QueryLease); err == nil {
		var lv lease.View
		if resp.Get(&lv) == nil {
			switch {
			case lv.Phase != api.LeasePending && lv.Phase != api.LeaseBound:
				writeError(w, http.StatusGone, api.ReasonExpired, "Lease ended", "the lease is "+string(lv.Phase))
				return
			case lv.IdleTimeout == 0 && lv.AfterInactivity == 0:
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
	}
	err := s.untilLeaseRuns(r.Context(), l, func() error {
		return s.Temporal.SignalWorkflow(r.Context(), leasestart.WorkflowID(l.ID), "", lease.SignalHeartbeat, nil)
	})
	if isNotRunning(err) {
		writeError(w, http.StatusGone, api.ReasonExpired, "Lease ended", "the lease is "+string(l.Phase))
		return
	}
	if err != nil {
		s.unavailable(w, r, "heartbeat", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
