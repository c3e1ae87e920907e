package testsuite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
)

// TestRecordHistories records real workflow histories for the replay tests in worker/.
// It runs only with KOBE_RECORD_HISTORIES=1. A change that alters a workflow's commands adds a
// version marker and a new recording (bump recordVersion to the release that adds it); the old
// files stay while their release is in the supported window (docs/architecture.md, "Releases
// and workflow versions").
func TestRecordHistories(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartWorker(t, tmp.Client, "record", s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	for name, in := range map[string]doctor.Input{
		"doctor-" + recordVersion + ".json":      {ProbeID: "rec-1"},
		"doctor-hold-" + recordVersion + ".json": {ProbeID: "rec-2", Hold: 2 * time.Second},
	} {
		id := "record-" + name
		run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "record"}, doctor.WorkflowName, in)
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, nil))
		writeHistory(t, ctx, tmp.Client, id, filepath.Join("..", "worker", "testdata", "histories", name))
	}

	// Provision and Teardown of a real local instance.
	acts := testsuite.StartHostWorker(t, tmp.Client, "record-host", s, t.TempDir())
	spec := backends.InstanceSpec{ID: "rec-instance", Pool: "rec", KubernetesVersion: "v1.37.2"}
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-provision", TaskQueue: "record-host"},
		instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "local", Spec: spec,
			Addons: []poolspec.Addon{{Name: "widgets", Manifest: widgetsCRD}},
			Gates:  []poolspec.ReadinessGate{{Type: "CRDExists", Name: "widgets.example.com"}}})
	require.NoError(t, err)
	var res instance.ProvisionResult
	require.NoError(t, run.Get(ctx, &res))
	writeHistory(t, ctx, tmp.Client, "record-provision", filepath.Join("..", "worker", "testdata", "histories", "provision-"+recordVersion+".json"))
	run, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-teardown", TaskQueue: "record-host"},
		instance.TeardownWorkflowName, instance.TeardownInput{Backend: "local", Spec: spec, Placement: res.Placement})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	writeHistory(t, ctx, tmp.Client, "record-teardown", filepath.Join("..", "worker", "testdata", "histories", "teardown-"+recordVersion+".json"))
	_ = acts

	// A pool of one, a lease bound, extended and released, and the pool refilling.
	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: rec}
spec:
  size: 1
  backend: {type: local}
  cluster: {version: v1.37.2}
`)
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("rec"), TaskQueue: "record-host"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "rec").Ready == 1 }, 2*time.Minute, 100*time.Millisecond)
	leaseRun, err := lease.Start(ctx, tmp.Client, "record-host", lease.Input{LeaseID: "lease-rec", Pool: "rec", Principal: "p",
		LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour, MaxExtensions: 2}, IdleTimeout: 10 * time.Minute}, true)
	require.NoError(t, err)
	wait, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "lease-rec", UpdateName: lease.UpdateWaitBound,
		WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, wait.Get(ctx, nil))
	require.Equal(t, api.LeaseBound, leaseView(t, tmp.Client, "lease-rec").Phase)
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, "lease-rec", "", lease.SignalHeartbeat, nil))
	// A sync report of its member (the condition Synced, audited), as the pool sends it after
	// a health check of a member whose backend syncs (vcluster); the local backend does not.
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, "lease-rec", "", pool.SignalInstanceSync, pool.SyncReport{
		InstanceID: leaseView(t, tmp.Client, "lease-rec").InstanceID, Reason: api.ReasonSyncDenied,
		Message: "Pod default/p: pods is forbidden: violates PodSecurity", Objects: 1, At: time.Now()}))
	require.Eventually(t, func() bool { return len(leaseView(t, tmp.Client, "lease-rec").Conditions) == 1 }, time.Minute, 50*time.Millisecond)
	h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "lease-rec", UpdateName: lease.UpdateExtend,
		Args: []any{lease.ExtendRequest{By: time.Minute}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, "lease-rec", "", lease.SignalReleaseLease, nil))
	require.NoError(t, leaseRun.Get(ctx, nil))
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "rec")
		return st.Ready == 1 && st.Deleting == 0 && st.Leased == 0
	}, 2*time.Minute, 100*time.Millisecond)
	// A warm bind: the Update claim binds the member, prepared when it became Ready, and
	// starts the lease's workflow; the lease is extended (no new credential) and released.
	warm := lease.Input{LeaseID: "lease-rec-warm", Pool: "rec", Principal: "p",
		LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour, MaxExtensions: 1}, SearchAttributes: true}
	bind, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: pool.WorkflowID("rec"), UpdateID: warm.LeaseID,
		UpdateName: pool.UpdateClaim, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{pool.BindRequest{Claim: pool.ClaimRequest{LeaseID: warm.LeaseID, At: time.Now()}, Lease: warm,
			SearchAttributes: lease.BoundSearchAttributes(warm)}}})
	require.NoError(t, err)
	var bound pool.BindResult
	require.NoError(t, bind.Get(ctx, &bound))
	require.True(t, bound.Bound, "the prepared member is bound at once: %+v", bound)
	require.Eventually(t, func() bool { return leaseView(t, tmp.Client, warm.LeaseID).Phase == api.LeaseBound }, time.Minute, 50*time.Millisecond)
	h, err = tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: warm.LeaseID, UpdateName: lease.UpdateExtend,
		Args: []any{lease.ExtendRequest{By: time.Minute}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, warm.LeaseID, "", lease.SignalReleaseLease, nil))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, warm.LeaseID, "").Get(ctx, nil))
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "rec")
		return st.Ready == 1 && st.Deleting == 0 && st.Leased == 0
	}, 2*time.Minute, 100*time.Millisecond)
	writeHistory(t, ctx, tmp.Client, warm.LeaseID, filepath.Join("..", "worker", "testdata", "histories", "lease-warm-"+recordVersion+".json"))

	// A claim cancelled after its assignment went out: the assignment reaches a running
	// workflow that never takes it — here a held doctor run standing in for a lease that is
	// ending — then the cancel-claim arrives and the pool tears the member down and refills.
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lease-rec-cancelled", TaskQueue: "record"},
		doctor.WorkflowName, doctor.Input{ProbeID: "rec-3", Hold: time.Minute})
	require.NoError(t, err)
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("rec"), "", pool.SignalClaim,
		pool.ClaimRequest{LeaseID: "lease-rec-cancelled", At: time.Now()}))
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "rec").Leased == 1 }, time.Minute, 100*time.Millisecond)
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("rec"), "", pool.SignalCancelClaim, "lease-rec-cancelled"))
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "rec")
		return st.Ready == 1 && st.Deleting == 0 && st.Leased == 0
	}, 2*time.Minute, 100*time.Millisecond)
	_ = tmp.Client.TerminateWorkflow(ctx, "lease-rec-cancelled", "", "recorded")

	// A new spec: the member is rolled (replacement first, then the outdated one torn down).
	pol.BackendOptions = []byte(`{"components":["apiserver"]}`)
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("rec"), "", pool.SignalApply, pol))
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "rec")
		return st.Generation == 1 && st.Ready == 1 && st.Outdated == 0 && st.Deleting == 0 && st.Creating == 0
	}, 3*time.Minute, 100*time.Millisecond)
	// Deleted, applied again while it drains (it lives on), then deleted for good: the
	// drained pool forgets its row (no store row here: the forget finds none) and ends.
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("rec"), "", pool.SignalDeletePool, pool.Deletion{Generation: 1}))
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("rec"), "", pool.SignalApply, pol))
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "rec")
		return st.Phase != api.PoolDraining && st.Ready == 1 && st.Deleting == 0 && st.Creating == 0
	}, 3*time.Minute, 100*time.Millisecond)
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("rec"), "", pool.SignalDeletePool, pool.Deletion{Generation: 2}))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, pool.WorkflowID("rec"), "").Get(ctx, nil), "the drained pool ends")
	writeHistory(t, ctx, tmp.Client, "lease-rec", filepath.Join("..", "worker", "testdata", "histories", "lease-"+recordVersion+".json"))
	writeHistory(t, ctx, tmp.Client, pool.WorkflowID("rec"), filepath.Join("..", "worker", "testdata", "histories", "pool-"+recordVersion+".json"))
}

// TestRecordPreflightHistory records the preflight of a pool's spec (on the local backend, which
// has Validate but no Preflight: the workflow's commands are the same for every backend).
func TestRecordPreflightHistory(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "record", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-preflight", TaskQueue: "record"},
		instance.PreflightWorkflowName, instance.PreflightInput{Backend: "local",
			Spec: backends.InstanceSpec{ID: "rec-preflight", Pool: "rec", KubernetesVersion: "v1.37.2"}})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	writeHistory(t, ctx, tmp.Client, "record-preflight", filepath.Join("..", "worker", "testdata", "histories", "preflight-"+recordVersion+".json"))
}

// TestRecordHostClusterProvisionHistory records a Provision and its Teardown whose pool names
// its host cluster (spec.backend.hostCluster): the placement goes through that host cluster's
// queue, which a worker started with --host-cluster-name polls. The instance is a local one
// (the workflow's commands are the same for every backend; the local one is ready fastest).
// Files are written only when absent: a recorded history is never replaced.
func TestRecordHostClusterProvisionHistory(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	dir := filepath.Join("..", "worker", "testdata", "histories")
	provisionFile, teardownFile := filepath.Join(dir, "provision-hostcluster-"+recordVersion+".json"), filepath.Join(dir, "teardown-hostcluster-"+recordVersion+".json")
	if _, err := os.Stat(provisionFile); err == nil {
		t.Skipf("%s is recorded already", provisionFile)
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	h, err := worker.StartHost(worker.HostConfig{Client: tmp.Client, Store: s, SharedQueue: "record", StateDir: t.TempDir(),
		Secrets: secretbox.Random(), HostClusterName: "rec-hosts"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.DeleteInstances() })
	t.Cleanup(h.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := backends.InstanceSpec{ID: "rec-hc-instance", Pool: "rec", KubernetesVersion: "v1.37.2"}
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-provision-hc", TaskQueue: "record"},
		instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "local", Spec: spec, HostCluster: "rec-hosts"})
	require.NoError(t, err)
	var res instance.ProvisionResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, instance.HostClusterID("rec-hosts"), res.Placement.HostID)
	require.Equal(t, instance.HostQueue("record", instance.HostClusterID("rec-hosts")), res.Placement.TaskQueue)
	writeHistory(t, ctx, tmp.Client, "record-provision-hc", provisionFile)
	run, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-teardown-hc", TaskQueue: "record"},
		instance.TeardownWorkflowName, instance.TeardownInput{Backend: "local", Spec: spec, Placement: res.Placement})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	writeHistory(t, ctx, tmp.Client, "record-teardown-hc", teardownFile)
}

// widgetsCRD is the addon of the recorded provision; its readiness gate waits for it.
const widgetsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// recordVersion names the files of this recording: the release whose workflows they record.
const recordVersion = "v0.1.0"

func writeHistory(t *testing.T, ctx context.Context, c client.Client, id, path string) {
	writeRunHistory(t, ctx, c, id, "", path)
}

// writeRunHistory writes the history of one run of a workflow ("": its latest run).
func writeRunHistory(t *testing.T, ctx context.Context, c client.Client, id, runID, path string) {
	iter := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	t.Logf("recorded %s (%d events)", path, len(h.Events))
}

// TestRecordCertificateSweepHistory records the certificate workflow's sweep over a store with
// one pool whose workflow does not run (the signal that fails is part of its shape).
func TestRecordCertificateSweepHistory(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "record", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "rec-certs", Backend: "local", Spec: []byte(`{}`)}))
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-certificate-sweep", TaskQueue: "record"},
		pool.CertificateSweepWorkflowName)
	require.NoError(t, err)
	var res pool.SweepResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, []string{"rec-certs"}, res.Missed)
	writeHistory(t, ctx, tmp.Client, "record-certificate-sweep", filepath.Join("..", "worker", "testdata", "histories", "certificate-sweep-"+recordVersion+".json"))
}

// TestRecordOrphanReaperHistory records a run of the orphan reaper that fails one orphan (a
// Pending lease with no workflow, past a grace of a millisecond).
func TestRecordOrphanReaperHistory(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "record", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err := s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: "rec-orphan", Pool: "rec", Principal: "alice", TTL: time.Hour}})
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond) // past the grace below
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-orphan-reaper", TaskQueue: "record"},
		lease.OrphanReaperWorkflowName, lease.ReapInput{Grace: time.Millisecond})
	require.NoError(t, err)
	var res lease.ReapResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, []string{"rec-orphan"}, res.Reaped)
	writeHistory(t, ctx, tmp.Client, "record-orphan-reaper", filepath.Join("..", "worker", "testdata", "histories", "orphan-reaper-"+recordVersion+".json"))
}
