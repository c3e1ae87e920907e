package testsuite_test

import (
	"context"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/doctor"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// TestHarnessRunsRealWorkflows checks the harness itself: a real server, a real worker, a real
// store on each driver, and a workflow that crosses all three.
func TestHarnessRunsRealWorkflows(t *testing.T) {
	tmp := testsuite.StartTemporal(t)
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			s := testsuite.NewStore(t, driver)
			queue := "harness-" + driver
			testsuite.StartWorker(t, tmp.Client, queue, s)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "doctor-harness-" + driver, TaskQueue: queue},
				doctor.WorkflowName, doctor.Input{ProbeID: "probe-" + driver})
			require.NoError(t, err)
			var res doctor.Result
			require.NoError(t, run.Get(ctx, &res))
			require.Equal(t, driver, res.Probe.StoreDriver)

			// The worker really wrote to this store.
			_, err = s.ReadProbe(ctx, "probe-"+driver)
			require.NoError(t, err)
			require.NoError(t, s.DeleteProbe(ctx, "probe-"+driver))
			_, err = s.ReadProbe(ctx, "probe-"+driver)
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}
