package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// Environment of the child process of TestSQLiteFileSharedByTwoProcesses.
const (
	envChildDB    = "KOBE_STORE_TEST_CHILD_DB"
	envChildName  = "KOBE_STORE_TEST_CHILD_NAME"
	envChildStart = "KOBE_STORE_TEST_CHILD_START"
)

const sharedWrites = 150

// TestSQLiteFileSharedByTwoProcesses: `kobe dev --no-worker` and a separate `kobe worker` use one
// SQLite store file. Two OS processes (this test binary, run again as a child) open a fresh file
// at the same moment — both migrate it — then write it concurrently the way activities do
// (instance upserts, lease upserts, audit events): no write fails with "database is locked",
// and every write of both is there.
func TestSQLiteFileSharedByTwoProcesses(t *testing.T) {
	if db := os.Getenv(envChildDB); db != "" {
		start, err := strconv.ParseInt(os.Getenv(envChildStart), 10, 64)
		require.NoError(t, err)
		writeConcurrently(t, db, os.Getenv(envChildName), time.Unix(0, start))
		return
	}
	if testing.Short() {
		t.Skip("runs a second process; skipped with -short")
	}
	db := filepath.Join(t.TempDir(), "kobe.db")
	start := time.Now().Add(2 * time.Second) // both processes open the file at this moment
	child := exec.Command(os.Args[0], "-test.run=^TestSQLiteFileSharedByTwoProcesses$", "-test.count=1", "-test.v")
	child.Env = append(os.Environ(), envChildDB+"="+db, envChildName+"=child", envChildStart+"="+strconv.FormatInt(start.UnixNano(), 10))
	out, err := os.Create(filepath.Join(t.TempDir(), "child.out"))
	require.NoError(t, err)
	child.Stdout, child.Stderr = out, out
	require.NoError(t, child.Start())

	writeConcurrently(t, db, "parent", start)
	err = child.Wait()
	logs, _ := os.ReadFile(out.Name())
	require.NoError(t, err, "the child's writes:\n%s", logs)
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "child (pid") {
			t.Log(strings.TrimSpace(line))
		}
	}

	ctx := context.Background()
	s, err := store.Open(ctx, "sqlite://"+db)
	require.NoError(t, err)
	defer s.Close()
	for _, who := range []string{"parent", "child"} {
		ins, err := s.ListInstances(ctx, store.InstanceFilter{Pool: who})
		require.NoError(t, err)
		assert.Len(t, ins, sharedWrites, "every instance row of the %s", who)
		leases, err := s.ListLeases(ctx, store.LeaseFilter{Pool: who})
		require.NoError(t, err)
		assert.Len(t, leases, sharedWrites, "every lease row of the %s", who)
		events, err := s.ListEvents(ctx, store.EventFilter{Actor: who})
		require.NoError(t, err)
		assert.Len(t, events, sharedWrites, "every event of the %s", who)
	}
	v, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Positive(t, v)
}

func writeConcurrently(t *testing.T, db, who string, start time.Time) {
	time.Sleep(time.Until(start))
	ctx := context.Background()
	t0 := time.Now()
	s, err := store.Open(ctx, "sqlite://"+db)
	require.NoError(t, err, "%s: open (and migrate) at the same moment as the other process", who)
	defer s.Close()
	opened := time.Since(t0)
	for i := 0; i < sharedWrites; i++ {
		id := fmt.Sprintf("%s-%d", who, i)
		require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: id, Pool: who, Backend: "local", Phase: "Creating"}), who)
		require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: id, Pool: who, Backend: "local", Phase: "Ready"}), who)
		require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: "lease-" + id, Pool: who, Principal: who, Phase: "Pending"}), who)
		_, err := s.AppendEvent(ctx, store.Event{Actor: who, Action: "instance.Ready", Target: id, Result: "ok"})
		require.NoError(t, err, who)
		_, err = s.GetInstance(ctx, id)
		require.NoError(t, err, who)
	}
	t.Logf("%s (pid %d): opened in %s, %d×5 statements in %s", who, os.Getpid(), opened.Round(time.Millisecond),
		sharedWrites, time.Since(t0).Round(time.Millisecond))
}
