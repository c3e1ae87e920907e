package server

import (
	"encoding/json"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"

	"go.temporal.io/sdk/client"
)

func clientUpdate(leaseID, name string, args ...any) client.UpdateWorkflowOptions {
	return client.UpdateWorkflowOptions{WorkflowID: leasestart.WorkflowID(leaseID), UpdateName: name, Args: args,
		WaitForStage: client.WorkflowUpdateStageCompleted}
}

// isNotRunning says whether a signal or update failed because the workflow has ended (or never
// existed).
func isNotRunning(err error) bool { return lease.IsNotRunning(err) }

func jsonUnmarshal(raw []byte, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}
