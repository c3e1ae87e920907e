// Package pool is the pool entity workflow: it keeps a pool's warm members (through
// instance.Provision and instance.Teardown), hands them to the leases that claim them, checks
// their health and recycles them, rolls them to a new spec and drains the pool when it is
// deleted. It defines the messages it receives and sends (claims, releases, assignments, claim
// failures, health reports); the lease package imports it.
package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease/leasestart"

	"github.com/kunobi-ninja/kobe/poolspec"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// WorkflowName is the registered name of the pool entity workflow.
const WorkflowName = "Pool"

// WorkflowID is the workflow id of a pool.
func WorkflowID(pool string) string { return "pool-" + pool }

// maxHistoryBeforeContinue keeps the entity's history bounded.
const maxHistoryBeforeContinue = 5000

// Pool is the entity workflow of one pool: the single writer of assignment. It keeps the warm
// target, provisions and tears down members (as separate workflows that report back by
// signal, so that continue-as-new never orphans them), and serves claims in order. What it
// decides is in state.go; this function receives the messages and carries the actions out.
func Pool(ctx workflow.Context, st Snapshot) error {
	s := NewState(st)
	p := &poolRun{ctx: ctx, s: s}
	if s.Incarnation == "" {
		// Random once per pool, recorded in history (a side effect), carried by every run.
		var tag string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any {
			return fmt.Sprintf("%08x", rand.Uint32())
		}).Get(&tag); err != nil {
			return err
		}
		s.Incarnation = tag
	}
	if err := workflow.SetQueryHandler(ctx, QueryPoolStatus, func() (Status, error) { return s.Status(p.Now()), nil }); err != nil {
		return err
	}
	if err := p.serveWarmBinds(); err != nil {
		return err
	}
	claims := workflow.GetSignalChannel(ctx, SignalClaim)
	handlers := []signalHandler{
		{claims, func(c workflow.ReceiveChannel) {
			var r ClaimRequest
			c.Receive(ctx, &r)
			s.Claim(r, p.Now())
			// Take the whole burst that has arrived, so that one pass serves it.
			for c.ReceiveAsync(&r) {
				s.Claim(r, p.Now())
			}
		}},
		{workflow.GetSignalChannel(ctx, SignalCancelClaim), func(c workflow.ReceiveChannel) {
			var leaseID string
			c.Receive(ctx, &leaseID)
			s.CancelClaim(leaseID, p)
		}},
		{workflow.GetSignalChannel(ctx, SignalRelease), func(c workflow.ReceiveChannel) {
			var r ReleaseRequest
			c.Receive(ctx, &r)
			s.Release(r, p)
		}},
		{workflow.GetSignalChannel(ctx, instance.SignalMemberReady), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			s.MemberReady(r, p.Now())
		}},
		{workflow.GetSignalChannel(ctx, instance.SignalMemberFail), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			s.MemberFailed(r, p.Now())
		}},
		{workflow.GetSignalChannel(ctx, instance.SignalMemberGone), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			s.MemberGone(r)
		}},
		{workflow.GetSignalChannel(ctx, SignalApply), func(c workflow.ReceiveChannel) {
			var pol poolspec.Policy
			c.Receive(ctx, &pol)
			s.Apply(pol)
		}},
	}
	handlers = append(handlers,
		signalHandler{workflow.GetSignalChannel(ctx, SignalDeletePool), func(c workflow.ReceiveChannel) {
			var d Deletion
			c.Receive(ctx, &d)
			s.Delete(d)
		}},
		signalHandler{workflow.GetSignalChannel(ctx, instance.SignalMemberQuarantined), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			s.MemberQuarantined(r, p.Now())
		}},
		signalHandler{workflow.GetSignalChannel(ctx, SignalRetryTeardown), func(c workflow.ReceiveChannel) {
			var a MemberAction
			c.Receive(ctx, &a)
			s.RetryTeardown(a, p)
		}},
		signalHandler{workflow.GetSignalChannel(ctx, SignalForgetMember), func(c workflow.ReceiveChannel) {
			var a MemberAction
			c.Receive(ctx, &a)
			s.ForgetMember(a)
		}},
		signalHandler{workflow.GetSignalChannel(ctx, SignalCheckCertificates), func(c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			for c.ReceiveAsync(nil) {
			}
			s.CertificateCheckRequested()
		}},
		p.warmWindowHandler(),
		signalHandler{workflow.GetSignalChannel(ctx, SignalMemberDown), func(c workflow.ReceiveChannel) {
			var r MemberDown
			c.Receive(ctx, &r)
			s.MemberDown(r, p)
		}},
	)

	for {
		s.Reconcile(p)
		if s.Draining && s.Drained() && p.schedulesSettled() {
			forgotten, err := p.forgetUnchanged()
			if err != nil {
				return err
			}
			if !forgotten {
				s.KeptByTheStore()
				continue
			}
			if p.endForgotten(handlers) {
				return nil
			}
			continue // applied again while it was being forgotten
		}
		// A run about to continue starts nothing more: the next run does it, and the work
		// started here would only be waited for (freezes) or lost (checks).
		if p.shouldContinueAsNew() {
			break
		}
		p.startHealthChecks()
		if !s.Draining {
			p.startCertificateChecks()
		}
		p.startFreezes()
		p.startScheduleSync()
		sel := workflow.NewSelector(ctx)
		for _, h := range handlers {
			sel.AddReceive(h.ch, func(c workflow.ReceiveChannel, _ bool) { h.handle(c) })
		}
		for _, c := range p.checks {
			sel.AddFuture(c.future, func(f workflow.Future) { p.healthChecked(c, f) })
		}
		for _, c := range p.certChecks {
			sel.AddFuture(c.future, func(f workflow.Future) { p.certificatesChecked(c, f) })
		}
		for _, b := range p.binds {
			sel.AddFuture(b.started, func(f workflow.Future) { p.leaseStarted(b, f) })
		}
		for _, o := range p.freezes {
			sel.AddFuture(o.future, func(f workflow.Future) { p.freezeDone(o) })
		}
		if p.schedules != nil {
			sel.AddFuture(p.schedules.future, func(workflow.Future) { p.schedulesSynced() })
		}
		if p.wake != nil {
			sel.AddReceive(p.wake, func(c workflow.ReceiveChannel, _ bool) {
				for c.ReceiveAsync(nil) {
				}
			})
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		if wake := s.NextWake(p.Now()); !wake.IsZero() {
			d := wake.Sub(p.Now())
			if d < time.Millisecond {
				d = time.Millisecond
			}
			sel.AddFuture(workflow.NewTimer(timerCtx, d), func(workflow.Future) {})
		}
		sel.Select(ctx)
		cancelTimer()
		if ctx.Err() != nil {
			// Cancelled (an operator's request): stop serving. Members keep running and stay
			// recorded in the store; starting the pool again adopts nothing, so deleting a
			// pool goes through its drain, not through cancellation.
			return ctx.Err()
		}
	}
	if err := p.settle(handlers); err != nil {
		return err
	}
	s.PruneAssigned(p.Now())
	return workflow.NewContinueAsNewError(ctx, WorkflowName, s.Snapshot)
}

// settle ends a run that continues as new: it waits for
// what the run has under way (Update handlers, the starts of warm-bound leases, freezes and
// thaws: a member left Freezing or Thawing, or Leased to a lease that never started, would never
// settle) and then handles every signal delivered, again until a round finds nothing under way
// and nothing delivered. That last round waits on nothing, so no signal can arrive between it
// and the continue-as-new; a wait after the signals were read would let in some that the run
// then drops. Health and certificate checks in flight are dropped: the next run checks again.
func (p *poolRun) settle(handlers []signalHandler) error {
	for {
		busy := len(p.binds) > 0 || len(p.freezes) > 0 || p.schedules != nil || !workflow.AllHandlersFinished(p.ctx)
		if err := p.finishUnderWay(); err != nil {
			return err
		}
		if read := readDelivered(handlers); !busy && !read {
			return nil
		}
	}
}

// finishUnderWay waits for the Update handlers running, the starts of warm-bound leases (a
// lease whose start failed must not leave its member Leased to nobody) and the freezes and thaws
// under way (a member left Freezing or Thawing in the snapshot would never settle), and a sync
// of the pool's Schedules.
func (p *poolRun) finishUnderWay() error {
	if err := workflow.Await(p.ctx, func() bool { return workflow.AllHandlersFinished(p.ctx) }); err != nil {
		return err
	}
	for len(p.binds) > 0 {
		b := p.binds[0]
		p.leaseStarted(b, b.started)
	}
	for len(p.freezes) > 0 {
		p.freezeDone(p.freezes[0])
	}
	// So is a sync of the schedules: the next run must know what it made.
	if p.schedules != nil {
		p.schedulesSynced()
	}
	return nil
}

// readDelivered handles every signal already delivered, until every channel is empty (handling
// one may wait, and more arrive meanwhile). It says whether it handled any.
func readDelivered(handlers []signalHandler) bool {
	read := false
	for pending := true; pending; {
		pending = false
		for _, h := range handlers {
			for h.ch.Len() > 0 {
				h.handle(h.ch)
				pending, read = true, true
			}
		}
	}
	return read
}

// signalHandler is one signal channel of the pool and what it does with a message.
type signalHandler struct {
	ch     workflow.ReceiveChannel
	handle func(workflow.ReceiveChannel)
}

// poolRun is one run of the pool workflow: its state, and the Executor that carries the
// state's actions out with Temporal.
type poolRun struct {
	ctx workflow.Context
	s   *State
	// checks are the health checks in flight, one per host queue.
	checks []*healthCheck
	// certChecks are the certificate checks in flight, one per host queue.
	certChecks []*certCheck
	// binds are the lease workflows started by warm binds whose start is not confirmed yet;
	// wake tells the main loop that a warm bind changed the state (it reconciles: the
	// replacement member starts off the bind's path).
	binds []*warmBind
	wake  workflow.Channel
	// freezes are the freezes and thaws of spares under way (FreezesDue).
	freezes []*freezeOp
	// schedules is the sync of the pool's Temporal Schedules under way (schedules.go).
	schedules *scheduleSync
}

// freezeOp is one FreezeMember activity in flight, off the claims' path.
type freezeOp struct {
	FreezeMember
	future workflow.Future
}

// startFreezes starts the freezes and thaws of spares that are due.
func (p *poolRun) startFreezes() {
	for _, f := range p.s.FreezesDue() {
		p.freezes = append(p.freezes, &freezeOp{FreezeMember: f, future: p.freezeActivity(f)})
	}
}

// freezeDone acts on a finished freeze or thaw.
func (p *poolRun) freezeDone(o *freezeOp) {
	kept := p.freezes[:0]
	for _, k := range p.freezes {
		if k != o {
			kept = append(kept, k)
		}
	}
	p.freezes = kept
	p.s.FreezeDone(freezeResult(o.FreezeMember, o.future.Get(p.ctx, nil)), p)
}

// freezeActivity starts BackendFreeze or BackendThaw on the member's host queue.
func (p *poolRun) freezeActivity(f FreezeMember) workflow.Future {
	var a *instance.Activities
	ctx := workflow.WithActivityOptions(p.ctx, freezeOptions(f.Queue))
	if f.Thaw {
		return workflow.ExecuteActivity(ctx, a.BackendThaw, f.Request)
	}
	return workflow.ExecuteActivity(ctx, a.BackendFreeze, f.Request)
}

// freezeResult is the outcome of a freeze or thaw as the decisions see it.
func freezeResult(f FreezeMember, err error) FreezeResult {
	r := FreezeResult{MemberID: f.MemberID, Thaw: f.Thaw}
	if err != nil {
		r.Err = err.Error()
		var app *temporal.ApplicationError
		r.Unavailable = errors.As(err, &app) && app.Type() == instance.ErrCannotFreeze
	}
	return r
}

// warmBind is a lease workflow the pool started on a warm bind.
type warmBind struct {
	asg     Assignment
	leaseID string
	started workflow.Future
}

// serveWarmBinds registers UpdateClaim: a claim bound at once to a prepared Ready member, the
// lease's workflow started by the pool with the assignment in its input.
func (p *poolRun) serveWarmBinds() error {
	p.wake = workflow.NewBufferedChannel(p.ctx, 1)
	return workflow.SetUpdateHandlerWithOptions(p.ctx, UpdateClaim,
		func(ctx workflow.Context, req BindRequest) (BindResult, error) {
			asg, why, ok := p.s.ClaimNow(req.Claim, p.Now())
			if !ok {
				return BindResult{Why: why}, nil
			}
			if thaw, ok := p.s.ThawForClaim(asg); ok {
				// Only frozen members were left: this one runs again before the answer.
				r := freezeResult(thaw, p.freezeActivity(thaw).Get(ctx, nil))
				// The actions a failed thaw leads to (a teardown) wait in this handler.
				var fx Executor = handlerExecutor{p: p, ctx: ctx}
				if !p.s.ClaimThawed(req.Claim.LeaseID, asg.InstanceID, r.Err, fx) {
					p.wake.SendAsync(true)
					return BindResult{Why: NotBoundThawFailed}, nil
				}
			}
			if asg.Seq != 0 { // a new bind, not a retried one
				p.startLease(req, asg)
				p.wake.SendAsync(true)
			}
			return BindResult{Bound: true, Assignment: asg}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req BindRequest) error {
			if req.Claim.LeaseID == "" || req.Lease.LeaseID != req.Claim.LeaseID {
				return errors.New("a warm bind needs the claim's lease id and the lease's workflow input for that lease")
			}
			return nil
		}})
}

// startLease starts the lease's workflow for a warm bind: the input the API built, bound to
// the assignment; a child that the pool abandons (it outlives every run).
func (p *poolRun) startLease(req BindRequest, asg Assignment) {
	in := req.Lease
	in.Bound = &asg
	var attrs []temporal.SearchAttributeUpdate
	for _, k := range keywordKeys(req.SearchAttributes) {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(k).ValueSet(req.SearchAttributes[k]))
	}
	cctx := workflow.WithChildOptions(p.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            leasestart.WorkflowID(req.Claim.LeaseID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...),
	})
	f := workflow.ExecuteChildWorkflow(cctx, leasestart.WorkflowType, in)
	p.binds = append(p.binds, &warmBind{asg: asg, leaseID: req.Claim.LeaseID, started: f.GetChildWorkflowExecution()})
}

// leaseStarted acts on the start of a warm-bound lease's workflow. If it did not start (its id
// was taken: the API, unsure whether the Update landed, started the lease itself), the lease
// that runs gets the assignment by signal as a queued claim would; if that fails too, nobody
// holds the member and it is torn down.
func (p *poolRun) leaseStarted(b *warmBind, f workflow.Future) {
	kept := p.binds[:0]
	for _, o := range p.binds {
		if o != b {
			kept = append(kept, o)
		}
	}
	p.binds = kept
	if err := f.Get(p.ctx, nil); err == nil {
		return
	}
	asg := b.asg
	asg.Prepared = false // that lease issues its own credential
	if err := p.Do(SignalLease{LeaseID: b.leaseID, Signal: SignalAssigned, Arg: asg}); err != nil {
		p.s.WarmBindLost(b.leaseID, b.asg.InstanceID, p)
	}
}

// shouldContinueAsNew: the SDK suggests it (history size or length), or the history passed the
// run's own threshold.
func (p *poolRun) shouldContinueAsNew() bool {
	info := workflow.GetInfo(p.ctx)
	limit := p.s.ContinueAsNewAfter
	if limit <= 0 {
		limit = maxHistoryBeforeContinue
	}
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > limit
}

// Now is the workflow's time.
func (p *poolRun) Now() time.Time { return workflow.Now(p.ctx) }

// Do carries an action out and waits for its outcome.
func (p *poolRun) Do(a Action) error { return p.Send(a)() }

// Send carries an action out; the function returned waits for its outcome.
func (p *poolRun) Send(a Action) func() error { return p.sendIn(p.ctx, a) }

// handlerExecutor carries actions out from an Update handler: a wait must block the handler's
// own coroutine (waiting on the run's context from a handler panics the workflow task).
type handlerExecutor struct {
	p   *poolRun
	ctx workflow.Context
}

func (h handlerExecutor) Now() time.Time             { return h.p.Now() }
func (h handlerExecutor) Do(a Action) error          { return h.p.sendIn(h.ctx, a)() }
func (h handlerExecutor) Send(a Action) func() error { return h.p.sendIn(h.ctx, a) }

// sendIn carries an action out; the function returned waits for its outcome in wctx (the
// coroutine that waits: the run's, or an Update handler's).
func (p *poolRun) sendIn(wctx workflow.Context, a Action) func() error {
	done := func() error { return nil }
	switch a := a.(type) {
	case StartProvision:
		return p.startChild(wctx, instance.WorkflowID(a.MemberID), instance.ProvisionWorkflowName, a.Input)
	case StartTeardown:
		return p.startChild(wctx, a.WorkflowID, instance.TeardownWorkflowName, a.Input)
	case SignalLease:
		f := workflow.SignalExternalWorkflow(p.ctx, leasestart.WorkflowID(a.LeaseID), "", a.Signal, a.Arg)
		return func() error { return f.Get(wctx, nil) }
	case CancelCreation:
		f := workflow.RequestCancelExternalWorkflow(p.ctx, instance.WorkflowID(a.MemberID), "")
		return func() error {
			err := f.Get(wctx, nil)
			if err != nil {
				// Its Provision is no longer running (the pool tears the member down).
				workflow.GetLogger(p.ctx).Warn("wedged member's provision is not running", "member", a.MemberID, "error", err)
			}
			return err
		}
	case CountRecycle:
		p.metrics().WithTags(map[string]string{"reason": a.Reason}).Counter(MetricInstanceRecycles).Inc(1)
	case CountHealthCheck:
		p.metrics().WithTags(map[string]string{"result": a.Result}).Counter(MetricHealthChecks).Inc(1)
	case ReissueCertificates:
		var acts *instance.Activities
		ctx := workflow.WithActivityOptions(p.ctx, certificateOptions(a.Queue, 10*time.Minute))
		f := workflow.ExecuteActivity(ctx, acts.ReissueCertificates, a.Request)
		return func() error { return f.Get(wctx, nil) }
	case AuditCertificates:
		var acts *instance.Activities
		ctx := workflow.WithActivityOptions(p.ctx, recordInstanceOptions())
		f := workflow.ExecuteActivity(ctx, acts.RecordCertificateEvent, a.Event)
		return func() error { return f.Get(wctx, nil) }
	case FreezeMember:
		f := p.freezeActivity(a)
		return func() error { return f.Get(wctx, nil) }
	case RecordInstance:
		var acts *instance.Activities
		ctx := workflow.WithActivityOptions(p.ctx, recordInstanceOptions())
		f := workflow.ExecuteActivity(ctx, acts.RecordInstance, a.Record)
		return func() error { return f.Get(wctx, nil) }
	default:
		panic(fmt.Sprintf("pool: no executor for action %T", a))
	}
	return done
}

func (p *poolRun) metrics() metricsHandler {
	return workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"profile": p.s.Policy.Name})
}

// startChild starts a member workflow that outlives this run (continue-as-new, pool deletion):
// it reports back by signal, not through its future. The function returned waits only for the
// start, so that an id clash is seen.
func (p *poolRun) startChild(wctx workflow.Context, id, name string, in any) func() error {
	cctx := workflow.WithChildOptions(p.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		RetryPolicy:           &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	f := workflow.ExecuteChildWorkflow(cctx, name, in)
	return func() error {
		var started workflow.Execution
		err := f.GetChildWorkflowExecution().Get(wctx, &started)
		if err != nil {
			workflow.GetLogger(p.ctx).Error("member workflow did not start", "id", id, "error", err)
		}
		return err
	}
}

// forgetUnchanged removes the drained pool's row unless it was applied again since the delete.
func (p *poolRun) forgetUnchanged() (bool, error) {
	var a *Activities
	ctx := workflow.WithActivityOptions(p.ctx, instance.StoreWriteOptions())
	var forgotten bool
	err := workflow.ExecuteActivity(ctx, a.ForgetUnchangedPool, ForgetPoolInput{
		Name: p.s.Policy.Name, Generation: p.s.DeleteGeneration}).Get(ctx, &forgotten)
	return forgotten, err
}

// endForgotten reads every signal delivered while the pool was being forgotten, so that the
// workflow never ends with one unread. An apply among them (recorded after the delete, so its
// row stands) keeps the pool serving: false. Otherwise the claims that came are refused with
// pool_deleted and the workflow may end: true.
func (p *poolRun) endForgotten(handlers []signalHandler) bool {
	for {
		pending := false
		for _, h := range handlers {
			for h.ch.Len() > 0 {
				h.handle(h.ch)
				pending = true
			}
		}
		if !p.s.Draining {
			return false
		}
		if !pending && len(p.s.Queue) == 0 {
			return true
		}
		p.s.Drain(p) // refuses the claims; waiting for the refusals lets more signals arrive
	}
}

// healthCheck is one CheckHealth activity in flight: the members of one host queue.
type healthCheck struct {
	CheckHealth
	future workflow.Future
}

// queuesBusy is the set of task queues with a member check (health or certificates) in
// flight: a pool runs one check of each kind per queue at a time.
func queuesBusy[C any](checks []*C, queue func(*C) string) map[string]bool {
	busy := map[string]bool{}
	for _, c := range checks {
		busy[queue(c)] = true
	}
	return busy
}

// withoutCheck drops a finished check from those in flight.
func withoutCheck[C any](checks []*C, done *C) []*C {
	kept := checks[:0]
	for _, c := range checks {
		if c != done {
			kept = append(kept, c)
		}
	}
	return kept
}

// startHealthChecks starts the health checks that are due.
func (p *poolRun) startHealthChecks() {
	inFlight := queuesBusy(p.checks, func(c *healthCheck) string { return c.Queue })
	var a *instance.Activities
	for _, c := range p.s.HealthChecksDue(p.Now(), inFlight) {
		ctx := workflow.WithActivityOptions(p.ctx, healthCheckOptions(c.Queue, c.Timeout))
		f := workflow.ExecuteActivity(ctx, a.CheckHealth, c.Request)
		p.checks = append(p.checks, &healthCheck{CheckHealth: c, future: f})
	}
}

// healthChecked acts on a finished check.
func (p *poolRun) healthChecked(c *healthCheck, f workflow.Future) {
	p.checks = withoutCheck(p.checks, c)
	var results []instance.HealthResult
	if err := f.Get(p.ctx, &results); err != nil {
		results = HealthCheckFailed(c.CheckHealth, err)
	}
	p.s.HealthChecked(results, p)
}

// keywordKeys are a lease's search attribute names in order (the child's options must not
// depend on map order).
func keywordKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	//workflowcheck:ignore collects the keys, sorted below
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
