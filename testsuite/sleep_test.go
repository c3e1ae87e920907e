package testsuite_test

import (
	"bufio"
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// TestLeaseSleepAndWake: a leased local cluster sleeps (its processes are gone and their memory
// with them; its kubeconfig's requests are refused at once), sleeping again changes nothing, and
// it wakes with an object created before it slept. With KOBE_RECORD_HISTORIES=1 it also records
// the lease's history and those of its sleep and wake (when absent).
func TestLeaseSleepAndWake(t *testing.T) {
	if testing.Short() {
		t.Skip("a real cluster; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	stateDir := t.TempDir()
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", s, stateDir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: sleepy}
spec:
  ttl: 10m
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
  scaling: {minReady: 1, maxClusters: 2, resumeTimeout: 2m}
`)
	require.Equal(t, 2*time.Minute, pol.ResumeTimeout)
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("sleepy"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "sleepy").Ready == 1 }, 3*time.Minute, 200*time.Millisecond)
	const id = "lease-sleepy"
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"},
		lease.WorkflowName, lease.Input{LeaseID: id, Pool: "sleepy", Principal: "alice",
			LeaseTerms: poolspec.LeaseTerms{TTL: pol.TTL, MaxTTL: pol.MaxTTL}})
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, id); return lv.Phase == api.LeaseBound }, time.Minute, 20*time.Millisecond)

	kube := leaseKube(t, s, acts, id)
	_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	instanceDir := filepath.Join(stateDir, "local", "instances", lv.InstanceID)
	pids, rss := processesUnder(t, instanceDir)
	require.NotEmpty(t, pids, "the instance's processes run (kine, kube-apiserver)")
	t.Logf("awake: %d processes, RSS %d MiB", len(pids), rss>>20)

	// The lease shows Bound a moment before it takes sleeps (refused not_ready until then: CI
	// saw it once), so a not_ready is asked again.
	sleep := func() lease.View {
		var v lease.View
		require.Eventually(t, func() bool {
			h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateSleep,
				Args: []any{lease.SleepRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
			if err == nil {
				err = h.Get(ctx, &v)
			}
			if reason, refused := lease.IsSleepRejection(err); refused && reason == api.ReasonNotReady {
				return false
			}
			require.NoError(t, err)
			return true
		}, time.Minute, 50*time.Millisecond)
		return v
	}
	lv = sleep()
	require.True(t, lv.Sleeping)
	assert.Equal(t, api.LeaseBound, lv.Phase, "a sleeping lease stays Bound: its TTL keeps running")
	requireCondition(t, lv, lease.ConditionSleeping, "True", api.ReasonAsleep)
	after, rssAfter := processesUnder(t, instanceDir)
	t.Logf("asleep: %d processes, RSS %d MiB (was %d MiB)", len(after), rssAfter>>20, rss>>20)
	assert.Empty(t, after, "no process of the instance is left")
	for _, pid := range pids {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		assert.True(t, os.IsNotExist(err), "process %d is gone", pid)
	}
	_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	require.Error(t, err, "asleep, the kubeconfig's requests are refused")
	assert.Contains(t, err.Error(), "connection refused")
	again := sleep()
	assert.Equal(t, lv.Sleeps, again.Sleeps, "sleeping a sleeping lease changes nothing")
	inst, err := s.GetInstance(ctx, lv.InstanceID)
	require.NoError(t, err)
	assert.Equal(t, api.InstanceSleeping, inst.Phase)

	h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateWake,
		Args: []any{lease.WakeRequest{ResumeTimeout: pol.ResumeTimeout}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	// A fresh value: the view's JSON omits a false Sleeping, so decoding into the asleep view
	// would keep its true.
	lv = lease.View{}
	require.NoError(t, h.Get(ctx, &lv))
	require.False(t, lv.Sleeping)
	requireCondition(t, lv, lease.ConditionSleeping, "False", api.ReasonAwake)
	cm, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err, "awake again, the same kubeconfig works")
	assert.Equal(t, "v", cm.Data["k"], "the object created before the sleep is still there")
	events, err := s.ListEvents(ctx, store.EventFilter{Target: lv.InstanceID})
	require.NoError(t, err)
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
	}
	assert.Contains(t, actions, instance.ActionInstanceSleep)
	assert.Contains(t, actions, instance.ActionInstanceWake)

	require.NoError(t, tmp.Client.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, id, "").Get(ctx, &lv))
	assert.Equal(t, api.LeaseReleased, lv.Phase)
	if os.Getenv("KOBE_RECORD_HISTORIES") == "1" {
		dir := filepath.Join("..", "worker", "testdata", "histories")
		for file, wid := range map[string]string{
			"lease-sleep-" + recordVersion + ".json": id,
			"sleep-" + recordVersion + ".json":       instance.SleepWorkflowID(lv.InstanceID, 1),
			"wake-" + recordVersion + ".json":        instance.WakeWorkflowID(lv.InstanceID, 2),
		} {
			if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
				continue // a recorded history is never replaced
			}
			writeHistory(t, ctx, tmp.Client, wid, filepath.Join(dir, file))
		}
	}
}

func requireCondition(t *testing.T, lv lease.View, typ, status string, reason api.ReasonCode) {
	t.Helper()
	for _, c := range lv.Conditions {
		if c.Type == typ {
			require.Equal(t, status, c.Status, "%+v", c)
			require.Equal(t, reason, c.Reason, "%+v", c)
			return
		}
	}
	t.Fatalf("no condition %s in %+v", typ, lv.Conditions)
}

// processesUnder lists the processes whose command line names dir (an instance's processes are
// started with their data and configuration there), and the sum of their resident memory.
func processesUnder(t *testing.T, dir string) (pids []int, rss int64) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		pids = append(pids, pid)
		rss += residentBytes(filepath.Join("/proc", e.Name(), "status"))
	}
	return pids, rss
}

func residentBytes(statusFile string) int64 {
	f, err := os.Open(statusFile)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
