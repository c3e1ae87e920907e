package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/instance"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/poolspec"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// errPreflightUnavailable says the spec could not be judged: no worker answered, or the
// backend's environment did not.
var errPreflightUnavailable = errors.New("preflight unavailable")

// preflight judges a pool's spec against its backend's environment before the pool is applied,
// for the backends that can only be judged there (backends.Preflighter: e.g. capi asks its
// management cluster whether the infrastructure kind, the ClusterClass and its variables
// exist). It returns the refusal ("" when the spec is fine), or errPreflightUnavailable.
// Backends without a preflight answer "" at once: their specs are judged by Validate when the
// manifest is parsed and again at every Create.
func (s *Server) preflight(ctx context.Context, pol poolspec.Policy) (string, error) {
	f, ok := backends.Lookup(pol.Backend)
	if !ok {
		return "", nil // refused by the manifest's validation already
	}
	// A named host cluster: its workers judge the spec (they reach that cluster), and a name no
	// worker has is refused.
	queue := s.TaskQueue
	if pol.HostCluster != "" {
		queue = instance.HostQueue(s.TaskQueue, instance.HostClusterID(pol.HostCluster))
		polled, err := s.polled(ctx, queue)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errPreflightUnavailable, err)
		}
		if !polled {
			return fmt.Sprintf("spec.backend.hostCluster: no worker serves host cluster %q (none was started with --host-cluster-name %s, or all have stopped)", pol.HostCluster, pol.HostCluster), nil
		}
	}
	if _, ok := f.Prototype.(backends.Preflighter); !ok {
		return "", nil
	}
	spec := backends.InstanceSpec{ID: pol.Name + "-preflight", Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion,
		Options: pol.BackendOptions}
	if scoper, ok := f.Prototype.(backends.PreflightScoper); ok && !scoper.NeedsPreflight(spec) {
		return "", nil
	}
	in := instance.PreflightInput{Backend: pol.Backend, Spec: spec}
	ctx, cancel := context.WithTimeout(ctx, instance.PreflightTimeout+5*time.Second)
	defer cancel()
	run, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       newID("preflight-" + pol.Name + "-"),
		TaskQueue:                queue,
		WorkflowExecutionTimeout: instance.PreflightTimeout,
	}, instance.PreflightWorkflowName, in)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errPreflightUnavailable, err)
	}
	var res instance.PreflightResult
	if err := run.Get(ctx, &res); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return "", fmt.Errorf("%w: %s", errPreflightUnavailable, appErr.Error())
		}
		return "", fmt.Errorf("%w: no worker running the %s backend answered within %s: %v", errPreflightUnavailable, pol.Backend, instance.PreflightTimeout, err)
	}
	return res.Refusal, nil
}

// polled says whether a worker polls a task queue for activities (Temporal remembers the
// pollers of the last minutes).
func (s *Server) polled(ctx context.Context, queue string) (bool, error) {
	ns := s.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	resp, err := s.Temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     ns,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
	})
	if err != nil {
		return false, fmt.Errorf("asking Temporal for the workers of task queue %s: %w", queue, err)
	}
	return len(resp.GetPollers()) > 0, nil
}
