package capi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/capi"
	"github.com/kunobi-ninja/kobe/testsuite/capimgmt"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
)

// The version CAPI's own e2e config uses for in-memory clusters (nothing runs it: the
// in-memory provider only has to accept it).
const workloadVersion = "v1.37.0"

func topologySpec(id string, extra string) backends.InstanceSpec {
	opts := `{"topology":{"class":"` + capimgmt.FastClass + `"` + extra + `}}`
	return backends.InstanceSpec{ID: id, Pool: "capi-test", KubernetesVersion: workloadVersion, Options: json.RawMessage(opts)}
}

func passThroughSpec(id string) backends.InstanceSpec {
	opts := `{"infrastructureApiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","infrastructureKind":"DevCluster",
	  "infrastructureSpec":{"backend":{"inMemory":{}}},"infrastructurePlural":"devclusters",
	  "controlPlane":{"replicas":1,"machineTemplateSpec":` + capimgmt.FastMachineTemplateSpec + `}}`
	return backends.InstanceSpec{ID: id, Pool: "capi-test", KubernetesVersion: workloadVersion, Options: json.RawMessage(opts)}
}

// noneLeft checks, by name and independently of the backend's own check, that nothing of a
// cluster remains in the management cluster.
func noneLeft(m *capimgmt.Cluster) func(id string) error {
	return func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		left, err := m.ObjectsNamedFor(ctx, id)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
		}
		return nil
	}
}

// What CAPD's in-memory workload API server cannot do: it authenticates nobody (any client
// certificate, or none, is admin), so a revoked or expired credential still works there. On a
// real provider's cluster the same credential (a certificate of the cluster's CA for a user
// bound by a ClusterRoleBinding) is rejected by kube-apiserver.
var inMemoryUnserved = map[string]string{
	conformance.StepRevokedCredentialRejected: "CAPD's in-memory workload API server does not authenticate or authorize requests, so it cannot reject a revoked credential",
	conformance.StepExpiredCredentialRejected: "CAPD's in-memory workload API server does not check client certificates, so it cannot reject an expired one",
}

// One management cluster (kube-apiserver, kine, kube-controller-manager, the four Cluster API
// managers) for every subtest: starting it takes ~15 s.
func TestOnRealClusterAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a management cluster and the Cluster API managers; skipped with -short")
	}
	m := capimgmt.Start(t)
	m.Apply(t, capimgmt.FastClassManifest("default"))
	m.WaitClassReconciled(t, "default", capimgmt.FastClass)
	b, err := capi.New(capi.Config{REST: m.Config, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, id := range b.InstanceIDs() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			_ = b.Delete(ctx, id)
			cancel()
		}
	})

	t.Run("conformance: ClusterClass topology", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{
			Backend: b,
			Spec: func(id string) backends.InstanceSpec {
				return topologySpec(id, `,"variables":[{"name":"flavour","value":"large"}]`)
			},
			InvalidSpecs: []backends.InstanceSpec{
				topologySpec("Bad_ID", ""),
				{ID: "conf-noopts", KubernetesVersion: workloadVersion},
				topologySpec("conf-noclass", `,"classNamespace":"nowhere"`),
				topologySpec("conf-badvar", `,"variables":[{"name":"flavour","value":"huge"}]`),
				topologySpec("conf-unknownvar", `,"variables":[{"name":"colour","value":"red"}]`),
			},
			ReadyWithin: 4 * time.Minute,
			Leftovers:   noneLeft(m),
			Unserved:    inMemoryUnserved,
		})
	})

	t.Run("conformance: pass-through infrastructure", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{
			Backend: b,
			Spec:    passThroughSpec,
			InvalidSpecs: []backends.InstanceSpec{
				func() backends.InstanceSpec {
					s := passThroughSpec("conf-badkind")
					s.Options = json.RawMessage(strings.Replace(string(s.Options), `"DevCluster"`, `"NoSuchCluster"`, 1))
					return s
				}(),
			},
			ReadyWithin: 4 * time.Minute,
			Leftovers:   noneLeft(m),
			Unserved:    inMemoryUnserved,
		})
	})

	t.Run("bad specs are refused before anything is created, with a clear error", func(t *testing.T) {
		ctx := context.Background()
		cases := map[string]struct {
			spec backends.InstanceSpec
			want string
		}{
			"unknown infrastructure kind": {
				func() backends.InstanceSpec {
					s := passThroughSpec("bad-kind")
					s.Options = json.RawMessage(strings.Replace(string(s.Options), `"DevCluster"`, `"NoSuchCluster"`, 1))
					return s
				}(),
				"spec.backend.capi.infrastructureKind: the management cluster serves no NoSuchCluster in infrastructure.cluster.x-k8s.io/v1beta2 (is its infrastructure provider installed?) (it serves: DevCluster,",
			},
			"wrong plural": {
				func() backends.InstanceSpec {
					s := passThroughSpec("bad-plural")
					s.Options = json.RawMessage(strings.Replace(string(s.Options), `"devclusters"`, `"devclusteres"`, 1))
					return s
				}(),
				`spec.backend.capi.infrastructurePlural: "devclusteres", but the management cluster serves DevCluster as "devclusters"`,
			},
			"infrastructureSpec the provider's schema refuses": {
				func() backends.InstanceSpec {
					s := passThroughSpec("bad-infraspec")
					s.Options = json.RawMessage(strings.Replace(string(s.Options), `{"backend":{"inMemory":{}}}`, `{"backend":{"inMemory":{}},"controlPlaneEndpoint":{"port":"x"}}`, 1))
					return s
				}(),
				"spec.backend.capi.infrastructureSpec: the management cluster refuses the DevCluster:",
			},
			"missing ClusterClass": {
				backends.InstanceSpec{ID: "bad-class", Pool: "p", KubernetesVersion: workloadVersion, Options: json.RawMessage(`{"topology":{"class":"no-such-class"}}`)},
				`spec.backend.capi.topology.class: the management cluster has no ClusterClass "no-such-class" in namespace "default" (there: kobe-fast)`,
			},
			"unknown variable": {
				topologySpec("bad-varname", `,"variables":[{"name":"colour","value":"red"}]`),
				`spec.backend.capi.topology.variables[0].name: ClusterClass default/kobe-fast has no variable "colour" (it has: flavour)`,
			},
			"variable value outside its schema": {
				topologySpec("bad-varvalue", `,"variables":[{"name":"flavour","value":"huge"}]`),
				"spec.backend.capi.topology: the management cluster refuses the Cluster:",
			},
			"unknown worker class": {
				topologySpec("bad-worker", `,"workers":[{"class":"gpu","name":"md-0","replicas":1}]`),
				`spec.backend.capi.topology.workers[0].class: ClusterClass default/kobe-fast has no machine deployment class "gpu" (it has: default-worker)`,
			},
			"a version that is not one": {
				backends.InstanceSpec{ID: "bad-version", Pool: "p", KubernetesVersion: "v1.37", Options: topologySpec("x", "").Options},
				`spec.cluster.version: "v1.37" is not a Kubernetes version`,
			},
		}
		names := make([]string, 0, len(cases))
		for n := range cases {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			c := cases[n]
			err := b.Preflight(ctx, c.spec)
			require.Error(t, err, n)
			assert.Contains(t, err.Error(), c.want, n)
			t.Logf("%s: %v", n, err)
			_, err = b.Create(ctx, c.spec)
			require.Error(t, err, n)
			assert.Contains(t, err.Error(), c.want, n)
			_, err = b.Status(ctx, c.spec.ID)
			assert.ErrorIs(t, err, backends.ErrNotFound, "%s: no Cluster", n)
			assert.NoError(t, noneLeft(m)(c.spec.ID), "%s: nothing created", n)
		}
	})

	t.Run("create to Available, one at a time and five at once", func(t *testing.T) {
		if os.Getenv("KOBE_CAPI_MEASURE") == "" {
			t.Skip("a measured run (about 6 minutes): set KOBE_CAPI_MEASURE=1 to run it")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		one := func(id string) time.Duration {
			t0 := time.Now()
			_, err := b.Create(ctx, topologySpec(id, ""))
			require.NoError(t, err)
			_, err = b.WaitReady(ctx, id, nil)
			require.NoError(t, err)
			return time.Since(t0)
		}
		var seq []time.Duration
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("seq-%d", i)
			seq = append(seq, one(id))
			require.NoError(t, b.Delete(ctx, id))
		}
		par := make([]time.Duration, 5)
		var wg sync.WaitGroup
		for i := range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				par[i] = one(fmt.Sprintf("par-%d", i))
			}()
		}
		wg.Wait()
		t0 := time.Now()
		for i := range par {
			wg.Add(1)
			go func() { defer wg.Done(); assert.NoError(t, b.Delete(ctx, fmt.Sprintf("par-%d", i))) }()
		}
		wg.Wait()
		t.Logf("create→Available, one at a time: %s (p50 %s)", durations(seq), p50(seq))
		t.Logf("create→Available, five at once: %s (p50 %s); deleting the five took %s", durations(par), p50(par), time.Since(t0).Round(100*time.Millisecond))
	})
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(100 * time.Millisecond)
}

func durations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Round(100*time.Millisecond).String())
	}
	return strings.Join(parts, " ")
}
