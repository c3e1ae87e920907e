package testsuite_test

import (
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// What the Temporal Web UI shows of a workflow's input is its history's first event: the
// durations in it are Go duration strings ("1h0m0s"), not nanoseconds.
func TestWorkflowInputsShowDurationsAsStrings(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	input := func(id string) string {
		t.Helper()
		iter := tmp.Client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		require.True(t, iter.HasNext())
		ev, err := iter.Next()
		require.NoError(t, err)
		payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
		require.NotEmpty(t, payloads)
		return string(payloads[0].GetData())
	}
	// No worker polls this queue: only the recorded input matters.
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "readable-doctor", TaskQueue: "nobody"},
		doctor.WorkflowName, doctor.Input{ProbeID: "p", Hold: 90 * time.Second})
	require.NoError(t, err)
	assert.Contains(t, input("readable-doctor"), `"hold":"1m30s"`)
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "readable-lease", TaskQueue: "nobody"},
		lease.WorkflowName, lease.Input{LeaseID: "readable-lease", Pool: "ci",
			LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 4 * time.Hour}})
	require.NoError(t, err)
	in := input("readable-lease")
	assert.Contains(t, in, `"ttl":"1h0m0s"`)
	assert.Contains(t, in, `"maxTtl":"4h0m0s"`)
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "readable-reaper", TaskQueue: "nobody"},
		lease.OrphanReaperWorkflowName, lease.ReapInput{Grace: 2 * time.Minute})
	require.NoError(t, err)
	assert.Contains(t, input("readable-reaper"), `"grace":"2m0s"`)
}
