package devserver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// lockCounter counts the log entries (any level) that report SQLite's "database is locked".
type lockCounter struct {
	zapcore.LevelEnabler
	mu    sync.Mutex
	count map[string]int // by level
	first string
}

func (c *lockCounter) With([]zapcore.Field) zapcore.Core { return c }
func (c *lockCounter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c *lockCounter) Sync() error { return nil }
func (c *lockCounter) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	text := e.Message + fmt.Sprint(enc.Fields)
	if strings.Contains(text, "database is locked") {
		c.mu.Lock()
		c.count[e.Level.String()]++
		if c.first == "" {
			c.first = text
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *lockCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.count {
		n += v
	}
	return n
}

func busyWorkflow(ctx workflow.Context, steps int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for i := 0; i < steps; i++ {
		if err := workflow.ExecuteActivity(ctx, "step", i).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// TestFileBackedTemporalUnderLoadIsNeverLocked runs the embedded server on a SQLite file, as
// `kobe dev` does, under a light concurrent load (workflows of a few activities, several at
// once) and counts the "database is locked" errors the server logs: SQLITE_BUSY (5) and
// SQLITE_BUSY_SNAPSHOT (517) of deferred transactions upgraded to writers on concurrent
// connections. There must be none.
func TestFileBackedTemporalUnderLoadIsNeverLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	locks := &lockCounter{LevelEnabler: zapcore.DebugLevel, count: map[string]int{}}
	ts, err := StartTemporal(TemporalOptions{
		DatabaseFile: filepath.Join(t.TempDir(), "temporal.db"),
		Logger:       zap.New(locks),
	})
	require.NoError(t, err)
	defer func() { _ = ts.Stop() }()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: ts.FrontendAddress(), Namespace: "default",
		Logger: nopLogger{}})
	require.NoError(t, err)
	defer c.Close()

	const queue, workflows, steps, concurrency = "busy", 60, 5, 12
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(busyWorkflow, workflow.RegisterOptions{Name: "busy"})
	w.RegisterActivityWithOptions(func(context.Context, int) error { return nil }, activityName("step"))
	require.NoError(t, w.Start())
	defer w.Stop()

	t0 := time.Now()
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	errs := make(chan error, workflows)
	for i := 0; i < workflows; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("busy-%d", i), TaskQueue: queue}, "busy", steps)
			if err == nil {
				err = run.Get(ctx, nil)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d workflows of %d activities, %d at once, in %s; 'database is locked' log entries: %v (first: %.300s)",
		workflows, steps, concurrency, time.Since(t0).Round(time.Millisecond), locks.count, locks.first)
	assert.Zero(t, locks.total(), "the embedded Temporal hit SQLITE_BUSY")
}

func activityName(n string) activity.RegisterOptions { return activity.RegisterOptions{Name: n} }

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
