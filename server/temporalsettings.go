package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease"
)

// The Temporal settings kobe relies on, by their dynamic-config keys (docs/deploy.md, "Temporal").
const (
	SettingUpdates          = "frontend.enableUpdateWorkflowExecution"
	SettingInFlightUpdates  = "history.maxInFlightUpdates"
	SettingPartitions       = "matching.numTaskqueueReadPartitions, matching.numTaskqueueWritePartitions"
	SettingEagerStart       = "system.enableEagerWorkflowStart"
	SettingSearchAttributes = "search attributes KobePool, KobeOwner, KobePhase"
	SettingRetention        = "namespace retention"
)

// InFlightUpdatesKobeNeeds is how many Updates one pool's workflow must be able to hold in
// flight: a burst of warm binds to one pool is a burst of Updates to its workflow, and each
// one refused past the limit takes the slow path (a queued claim) instead of binding at once.
const InFlightUpdatesKobeNeeds = 50

// probeTaskQueue is where the settings probe starts its workflow: no worker polls it, so the
// workflow never runs and the Updates sent to it stay in flight until the probe ends it.
const probeTaskQueue = "kobe-doctor-probe"

// updateProbeWait bounds how long the probe's Updates wait: the limit, when it is reached,
// refuses at once; the others wait this long for a worker that never comes.
const updateProbeWait = 2 * time.Second

// ReadTemporalSettings reads, or probes where the service does not expose them, the Temporal
// settings kobe's bind depends on. The probe starts one workflow on probeTaskQueue (with eager
// start requested), sends it InFlightUpdatesKobeNeeds Updates at once and terminates it; a
// setting that cannot be read is reported with what prevented it, never guessed.
func ReadTemporalSettings(ctx context.Context, c client.Client, namespace, taskQueue, probeID string) []api.TemporalSetting {
	settings := []api.TemporalSetting{
		readPartitions(ctx, c, namespace, taskQueue),
		readSearchAttributes(ctx, c, namespace),
		readRetention(ctx, c, namespace),
	}
	return append(settings, probeStartAndUpdates(ctx, c, namespace, probeID)...)
}

func readPartitions(ctx context.Context, c client.Client, namespace, taskQueue string) api.TemporalSetting {
	s := api.TemporalSetting{Name: SettingPartitions}
	resp, err := c.WorkflowService().ListTaskQueuePartitions(ctx, &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
	})
	if err != nil {
		return unreadable(s, err)
	}
	workflow, activity := len(resp.GetWorkflowTaskQueuePartitions()), len(resp.GetActivityTaskQueuePartitions())
	s.Value = fmt.Sprintf("task queue %s: %d workflow, %d activity partitions", taskQueue, workflow, activity)
	s.OK = workflow <= 1 && activity <= 1
	if !s.OK {
		s.Detail = "with more than one partition, a task lands on a partition that none of kobe's few pollers may be polling " +
			"and waits to be forwarded: every bind and every activity pays it. Set both to 1 for kobe's task queues " +
			"(keep more only when hundreds of workers poll them)"
	}
	return s
}

func readSearchAttributes(ctx context.Context, c client.Client, namespace string) api.TemporalSetting {
	s := api.TemporalSetting{Name: SettingSearchAttributes}
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return unreadable(s, err)
	}
	var missing []string
	for _, key := range []string{lease.SearchAttributePool.GetName(), lease.SearchAttributeOwner.GetName(), lease.SearchAttributePhase.GetName()} {
		if resp.GetCustomAttributes()[key] != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			missing = append(missing, key)
		}
	}
	s.OK = len(missing) == 0
	if s.OK {
		s.Value = "registered (Keyword)"
		return s
	}
	s.Value = fmt.Sprintf("missing or not Keyword: %v", missing)
	s.Detail = fmt.Sprintf("leases start without them and cannot be found by pool, owner or phase in the Temporal UI; "+
		"create each with: temporal operator search-attribute create --namespace %s --type Keyword --name <name>", namespace)
	return s
}

func readRetention(ctx context.Context, c client.Client, namespace string) api.TemporalSetting {
	s := api.TemporalSetting{Name: SettingRetention, OK: true}
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return unreadable(s, err)
	}
	s.Value = resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration().String()
	return s
}

// inFlightLimit finds the limit in the history service's refusal, "limit on number of
// concurrent in-flight updates has been reached (10)".
var inFlightLimit = regexp.MustCompile(`in-flight updates has been reached \((\d+)\)`)

// probeStartAndUpdates starts the probe workflow and sends it Updates: the start answers
// whether eager start is on, the Updates whether Updates are on and how many may be in flight.
func probeStartAndUpdates(ctx context.Context, c client.Client, namespace, probeID string) []api.TemporalSetting {
	eager := api.TemporalSetting{Name: SettingEagerStart, OK: true}
	updates := api.TemporalSetting{Name: SettingUpdates}
	inFlight := api.TemporalSetting{Name: SettingInFlightUpdates}
	workflowID := probeID + "-temporal-settings"
	started, err := c.WorkflowService().StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace:    namespace,
		WorkflowId:   workflowID,
		WorkflowType: &commonpb.WorkflowType{Name: "KobeTemporalSettingsProbe"},
		TaskQueue:    &taskqueuepb.TaskQueue{Name: probeTaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		// A backstop: the workflow times out by itself should the terminate below not land.
		WorkflowExecutionTimeout: durationpb.New(time.Minute),
		Identity:                 "kobe-doctor",
		RequestId:                workflowID,
		RequestEagerExecution:    true,
	})
	if err != nil {
		return []api.TemporalSetting{unreadable(eager, err), unreadable(updates, err), unreadable(inFlight, err)}
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.TerminateWorkflow(tctx, workflowID, started.GetRunId(), "kobe doctor: Temporal settings probe done")
	}()
	eager.Value = "disabled"
	eager.Detail = "only kobe dev's in-process worker takes a new workflow's first task eagerly; kobe server and kobe worker run apart and do not need it"
	if started.GetEagerWorkflowTask() != nil {
		eager.Value, eager.Detail = "enabled", ""
	}

	errs := make([]error, InFlightUpdatesKobeNeeds)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uctx, cancel := context.WithTimeout(ctx, updateProbeWait)
			defer cancel()
			_, errs[i] = c.WorkflowService().UpdateWorkflowExecution(uctx, &workflowservice.UpdateWorkflowExecutionRequest{
				Namespace:         namespace,
				WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: started.GetRunId()},
				WaitPolicy:        &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED},
				Request: &updatepb.Request{
					Meta:  &updatepb.Meta{UpdateId: fmt.Sprintf("probe-%d", i), Identity: "kobe-doctor"},
					Input: &updatepb.Input{Name: "probe"},
				},
			})
		}()
	}
	wg.Wait()

	var refusedAtLimit, other error
	refused := 0
	for _, err := range errs {
		var denied *serviceerror.PermissionDenied
		var exhausted *serviceerror.ResourceExhausted
		switch {
		case err == nil, isWaitTimeout(err):
			// Admitted, and waiting for a worker that never comes: in flight, as intended.
		case errors.As(err, &denied):
			updates.Value = "disabled"
			updates.Detail = "a warm bind is an Update to the pool's workflow: every lease takes the slow path (a queued claim, " +
				"seconds instead of milliseconds), and lease extend, sleep and wake fail"
			inFlight.Value = "not probed: Updates are disabled"
			return []api.TemporalSetting{eager, updates, inFlight}
		case errors.As(err, &exhausted) && inFlightLimit.MatchString(err.Error()):
			refused++
			refusedAtLimit = err
		default:
			other = err
		}
	}
	updates.OK, updates.Value = true, "enabled"
	switch {
	case refusedAtLimit != nil:
		limit := fmt.Sprintf("fewer than %d", InFlightUpdatesKobeNeeds)
		if m := inFlightLimit.FindStringSubmatch(refusedAtLimit.Error()); m != nil {
			limit = m[1]
		}
		inFlight.Value = limit
		inFlight.Detail = fmt.Sprintf("%d of %d Updates sent at once to one workflow were refused: in a burst of binds to one pool, "+
			"each one past the limit takes the slow path. Set it to at least %d (kobe dev sets 500)",
			refused, InFlightUpdatesKobeNeeds, InFlightUpdatesKobeNeeds)
	case other != nil:
		inFlight = unreadable(inFlight, other)
	default:
		inFlight.OK, inFlight.Value = true, fmt.Sprintf("at least %d", InFlightUpdatesKobeNeeds)
	}
	return []api.TemporalSetting{eager, updates, inFlight}
}

// isWaitTimeout is an Update that was admitted and outwaited updateProbeWait.
func isWaitTimeout(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline)
}

// unreadable reports a setting the service would not show (a managed Temporal may refuse the
// operator API): not OK, so that the operator checks it by hand.
func unreadable(s api.TemporalSetting, err error) api.TemporalSetting {
	s.OK = false
	s.Value = "unknown"
	s.Detail = "could not read it: " + err.Error() + "; check it by hand (docs/deploy.md, \"Temporal\")"
	return s
}
