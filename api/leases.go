package api

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/workflows"
)

// StartLease starts a lease's workflow (id = lease id) on the task queue. With searchable set
// (kobe's search attributes are registered, see EnsureSearchAttributes) the lease is tagged
// with its pool, owner and phase for the Temporal Web UI's filters.
func StartLease(ctx context.Context, c client.Client, taskQueue string, in workflows.LeaseInput, searchable bool) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		ID:        workflows.LeaseWorkflowID(in.LeaseID),
		TaskQueue: taskQueue,
		// A lease id is never reused, not even after the lease ended.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	in.SearchAttributes = searchable
	if searchable {
		opts.TypedSearchAttributes = workflows.LeaseSearchAttributes(in)
	}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.LeaseWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("starting lease %s: %w", in.LeaseID, err)
	}
	return run, nil
}
