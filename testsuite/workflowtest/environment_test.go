package workflowtest_test

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
)

// slowTask stands for a workflow task on a loaded machine: it holds the workflow goroutine for
// 1.5 s of wall-clock time without yielding (what a slow machine does to ordinary code).
func slowTask(ctx workflow.Context) (string, error) {
	//workflowcheck:ignore holding the goroutine for wall-clock time is what this workflow is for
	time.Sleep(1500 * time.Millisecond)
	return "done", nil
}

// The SDK's own environment fails such a task as a deadlock: the limit this package raises.
func TestTheSDKsDefaultEnvironmentFailsASlowTask(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(slowTask)
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "Potential deadlock detected") {
		t.Fatalf("the SDK's environment: want a deadlock error for a 1.5 s task, got %v", err)
	}
}

func TestASlowTaskIsNotADeadlock(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.ExecuteWorkflow(slowTask)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("a 1.5 s task failed: %v", err)
	}
	var got string
	if err := env.GetWorkflowResult(&got); err != nil || got != "done" {
		t.Fatalf("result %q, %v", got, err)
	}
}
