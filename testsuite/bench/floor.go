package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/lease"
)

// The engine floor: what the Temporal server embedded in `kobe dev` costs by itself, measured
// from the bench process against that same server, with a worker of the bench's own on a task
// queue of its own. A lease bind is a workflow start plus an Update (the GET ?wait) plus kobe's
// work in between, so these two figures bound from below what a bind could ever cost here.
const (
	floorTaskQueue = "kobe-bench-floor"
	floorWorkflow  = "KobeBenchFloor"
	floorChild     = "KobeBenchFloorChild"
	floorUpdate    = "ping"
	floorStart     = "start"
	floorFinish    = "finish"
)

// FloorWorkflow accepts the "ping" Update, which returns at once, and the "start" Update,
// which starts a child workflow the parent abandons and returns at once (as a warm bind's
// Update starts the lease's workflow), until it is signalled to finish (the bench terminates
// it instead).
func FloorWorkflow(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandler(ctx, floorUpdate, func(ctx workflow.Context) error { return nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, floorStart, func(ctx workflow.Context, childID string) error {
		// As a lease's workflow starts: its three keyword search attributes (kobe dev registered
		// them), the parent not waiting for anything but the command.
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        childID,
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
			TypedSearchAttributes: temporal.NewSearchAttributes(lease.SearchAttributePool.ValueSet("bench-floor"),
				lease.SearchAttributeOwner.ValueSet("bench"), lease.SearchAttributePhase.ValueSet("Bound")),
		})
		workflow.ExecuteChildWorkflow(cctx, floorChild)
		return nil
	}); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, floorFinish).Receive(ctx, nil)
	return nil
}

// FloorChildWorkflow does what a warm-bound lease's first task does (it arms its TTL timer)
// and waits: the bench terminates it.
func FloorChildWorkflow(ctx workflow.Context) error {
	return workflow.Sleep(ctx, time.Hour)
}

// newFloorWorker is the bench's own worker of the floor workflows.
func newFloorWorker(c client.Client) worker.Worker {
	w := worker.New(c, floorTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(FloorWorkflow, workflow.RegisterOptions{Name: floorWorkflow})
	w.RegisterWorkflowWithOptions(FloorChildWorkflow, workflow.RegisterOptions{Name: floorChild})
	return w
}

// measureFloor returns n samples of (a) an Update to one running workflow, sequentially, and
// (b) an UpdateWithStart of a fresh workflow, each waiting until the Update completed.
func measureFloor(ctx context.Context, hostPort string, n int, log *progress) (update, withStart []time.Duration, err error) {
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: "default",
		// The SDK logs every worker start and stop at info; the bench prints its own progress.
		Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return nil, nil, fmt.Errorf("dialing Temporal at %s: %w", hostPort, err)
	}
	defer c.Close()
	w := newFloorWorker(c)
	if err := w.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the floor worker: %w", err)
	}
	defer w.Stop()

	prefix := fmt.Sprintf("kobe-bench-floor-%d", time.Now().UnixNano())
	var started []string
	defer func() {
		// Terminate every floor workflow, whatever happened (a fresh context: ctx may be done).
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range started {
			_ = c.TerminateWorkflow(cctx, id, "", "kobe-bench: done")
		}
	}()

	ping := func(id string) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: floorUpdate,
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	startAndPing := func(id string) error {
		op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: floorTaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, floorWorkflow)
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateName: floorUpdate, WaitForStage: client.WorkflowUpdateStageCompleted}})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}

	// (a) One running workflow; the first Update is a warm-up (the worker caches the workflow
	// after its first task, as kobe's worker caches a lease), not timed.
	running := prefix + "-running"
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: running, TaskQueue: floorTaskQueue}, floorWorkflow); err != nil {
		return nil, nil, fmt.Errorf("starting the floor workflow: %w", err)
	}
	started = append(started, running)
	if err := ping(running); err != nil {
		return nil, nil, fmt.Errorf("floor Update (warm-up): %w", err)
	}
	for i := range n {
		t0 := time.Now()
		if err := ping(running); err != nil {
			return nil, nil, fmt.Errorf("floor Update %d: %w", i+1, err)
		}
		update = append(update, time.Since(t0))
	}
	log.Printf("  Update to a running workflow: %d samples, p50 %s", n, FormatMs(Ms(Percentile(update, 0.5))))

	// (b) A fresh workflow per sample; one untimed warm-up first.
	for i := 0; i <= n; i++ {
		id := fmt.Sprintf("%s-start-%d", prefix, i)
		t0 := time.Now()
		err := startAndPing(id)
		d := time.Since(t0)
		started = append(started, id)
		if err != nil {
			return nil, nil, fmt.Errorf("floor UpdateWithStart %d: %w", i, err)
		}
		if i > 0 {
			withStart = append(withStart, d)
		}
	}
	log.Printf("  UpdateWithStart: %d samples, p50 %s", n, FormatMs(Ms(Percentile(withStart, 0.5))))
	return update, withStart, nil
}

// measureConcurrentFloor returns the latencies of Updates sent by n clients at once, each
// `per` times in a row, all to one running workflow: the floor of a bind level of n clients,
// whose Updates all go to one pool's workflow. update is the plain Update; startingChild the
// Update that starts a child workflow (a lease's, abandoned), measured the same way right after:
// the engine's cost of the bind's design, a lease with its own workflow started by the pool.
func measureConcurrentFloor(ctx context.Context, hostPort string, n, per int) (update, startingChild []time.Duration, err error) {
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: "default",
		Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return nil, nil, fmt.Errorf("dialing Temporal at %s: %w", hostPort, err)
	}
	defer c.Close()
	w := newFloorWorker(c)
	if err := w.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the floor worker: %w", err)
	}
	defer w.Stop()
	id := fmt.Sprintf("kobe-bench-floor-%d-clients-%d", n, time.Now().UnixNano())
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: floorTaskQueue}, floorWorkflow); err != nil {
		return nil, nil, fmt.Errorf("starting the floor workflow: %w", err)
	}
	var children []string
	var childrenMu sync.Mutex
	defer func() {
		// Outside the timing: the floor workflow and every child it started.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.TerminateWorkflow(cctx, id, "", "kobe-bench: done")
		for _, child := range children {
			_ = c.TerminateWorkflow(cctx, child, "", "kobe-bench: done")
		}
	}()
	send := func(name string, args ...any) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name,
			Args: args, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	if err := send(floorUpdate); err != nil { // warm-up: the worker caches the workflow
		return nil, nil, fmt.Errorf("floor Update (warm-up): %w", err)
	}
	update, err = concurrently(n, per, func(int) error { return send(floorUpdate) })
	if err != nil {
		return update, nil, fmt.Errorf("floor Update: %w", err)
	}
	startingChild, err = concurrently(n, per, func(i int) error {
		child := fmt.Sprintf("%s-child-%d", id, i)
		childrenMu.Lock()
		children = append(children, child)
		childrenMu.Unlock()
		return send(floorStart, child)
	})
	if err != nil {
		return update, startingChild, fmt.Errorf("floor Update starting a child: %w", err)
	}
	return update, startingChild, nil
}

// concurrently runs f from n goroutines at once, each `per` times in a row (i numbers the calls
// 0..n*per-1), and returns the latencies of the calls that succeeded and the first error.
func concurrently(n, per int, f func(i int) error) ([]time.Duration, error) {
	var mu sync.Mutex
	var out []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := range per {
				t0 := time.Now()
				err := f(g*per + k)
				d := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					out = append(out, d)
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return out, firstErr
}
