package testsuite_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	_ "github.com/kunobi-ninja/kobe/backends/k0s"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
	"github.com/kunobi-ninja/kobe/worker"
)

// TestPoolNamesItsHostCluster: two host clusters, each with its own worker (--host-kubeconfig
// and --host-cluster-name), one Temporal and one API. A pool naming host cluster "b" has its
// members created in b only, placed on b's queue (the store's host says so); a pool naming a
// host cluster no worker serves is refused at apply, nothing recorded. (k0s members: the host
// clusters' pods are kwok's, so the members never get Ready; where they are created is the point.)
func TestPoolNamesItsHostCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("two host clusters and real Temporal; skipped with -short")
	}
	a := hostcluster.Start(t, hostcluster.Options{Nodes: 1})
	b := hostcluster.Start(t, hostcluster.Options{Nodes: 1})
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	secrets := secretbox.Random()
	for name, c := range map[string]*hostcluster.Cluster{"a": a, "b": b} {
		dir := t.TempDir()
		kubeconfig := filepath.Join(dir, "host.kubeconfig")
		require.NoError(t, os.WriteFile(kubeconfig, c.Kubeconfig, 0o600))
		h, err := worker.StartHost(worker.HostConfig{Client: tmp.Client, Store: s, SharedQueue: "kobe", StateDir: dir,
			Secrets: secrets, HostKubeconfig: kubeconfig, HostClusterName: name})
		require.NoError(t, err)
		t.Cleanup(h.Stop)
	}
	srv := &server.Server{Store: s, Temporal: tmp.Client, TaskQueue: "kobe", InsecureNoAuth: true}
	h := srv.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	apply := func(name, hostCluster string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/pools/"+name, strings.NewReader(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1",
			"kind":"ClusterPool","metadata":{"name":"`+name+`"},"spec":{"size":1,"backend":{"type":"k0s","hostCluster":"`+hostCluster+`"},
			"cluster":{"version":"v1.32.1+k0s.0"}}}`)))
		return rec
	}

	// Accepted once b's worker polls its queue (Temporal knows pollers once they poll); the
	// spec is judged there, by b's k0s backend against b (server-side dry-run).
	var rec *httptest.ResponseRecorder
	require.Eventually(t, func() bool {
		rec = apply("on-b", "b")
		if rec.Code != 201 {
			t.Logf("apply: %d %s", rec.Code, rec.Body.String())
		}
		return rec.Code == 201
	}, time.Minute, time.Second, "b's worker polls its queue")

	rec = apply("elsewhere", "nowhere")
	assert.Equal(t, 400, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), `spec.backend.hostCluster: no worker serves host cluster \"nowhere\"`)
	_, err := s.GetPool(ctx, "elsewhere")
	assert.ErrorIs(t, err, store.ErrNotFound, "a refused pool is not recorded")

	// The labels of backends/internal/hosted (an instance's CA Secret).
	sel := metav1.ListOptions{LabelSelector: "kobe.kunobi.ninja/pool=on-b,kobe.kunobi.ninja/component=ca"}
	require.Eventually(t, func() bool {
		list, err := b.Client.CoreV1().Secrets("").List(ctx, sel)
		return err == nil && len(list.Items) > 0
	}, 2*time.Minute, 500*time.Millisecond, "the member is created in host cluster b")
	list, err := a.Client.CoreV1().Secrets("").List(ctx, sel)
	require.NoError(t, err)
	assert.Empty(t, list.Items, "nothing of the pool in host cluster a")
	var rows []store.Instance
	require.Eventually(t, func() bool {
		rows, err = s.ListInstances(ctx, store.InstanceFilter{})
		return err == nil && len(rows) > 0
	}, time.Minute, 200*time.Millisecond)
	for _, r := range rows {
		if r.Pool == "on-b" {
			assert.Equal(t, instance.HostClusterID("b"), r.Host, "placed in host cluster b: its activities run on b's queue")
		}
	}
}
