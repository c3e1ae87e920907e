package lease

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/lease/leasestart"
)

// Start starts a lease's workflow (id = lease id) on the task queue, as the API does when no
// warm bind took the lease. With searchable set (kobe's search attributes are registered on
// the namespace) the lease is tagged with its pool, owner and phase for the Temporal Web UI's
// filters.
func Start(ctx context.Context, c client.Client, taskQueue string, in Input, searchable bool) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		ID:        leasestart.WorkflowID(in.LeaseID),
		TaskQueue: taskQueue,
		// A lease id is never reused, not even after the lease ended.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	in.SearchAttributes = searchable
	if searchable {
		opts.TypedSearchAttributes = SearchAttributes(in)
	}
	run, err := c.ExecuteWorkflow(ctx, opts, WorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("starting lease %s: %w", in.LeaseID, err)
	}
	return run, nil
}
