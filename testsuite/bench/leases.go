package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// apiBench drives kobe through its REST API only, with the typed client the CLI uses.
type apiBench struct {
	admin *api.Client
	// clients[i] acts for principal bench-client-<i> with role ci: one principal per concurrent
	// client, as separate CI jobs would be. One admin token for all would measure the
	// per-principal rate limiter (20 requests/s, burst 40) instead of the lease path.
	clients  []*api.Client
	stateDir string
	log      *progress
	// answers503 counts the 503 answers of every client's requests.
	answers503 *counting503
}

func newAPIBench(baseURL, adminToken, stateDir string, log *progress) (*apiBench, error) {
	admin, err := api.NewClient(baseURL)
	if err != nil {
		return nil, err
	}
	admin.Token = adminToken
	// One transport for every client, keeping enough idle connections for the largest level:
	// the default (2 per host) would make most requests of a 50-client burst open a new
	// connection, which measures TCP churn rather than kobe.
	counted := &counting503{base: &http.Transport{MaxIdleConns: 2 * MaxClients, MaxIdleConnsPerHost: 2 * MaxClients, IdleConnTimeout: time.Minute}}
	admin.HTTPClient = &http.Client{Timeout: 90 * time.Second, Transport: counted}
	return &apiBench{admin: admin, stateDir: stateDir, log: log, answers503: counted}, nil
}

// counting503 counts the 503 answers the clients got (the typed client retries them: they are
// inside the latencies, and the report says how many there were).
type counting503 struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *counting503) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
		c.n.Add(1)
	}
	return resp, err
}

// makeClients creates n ci tokens (POST /v1/tokens) and a client for each.
func (b *apiBench) makeClients(ctx context.Context, n int) error {
	for i := len(b.clients); i < n; i++ {
		name := fmt.Sprintf("bench-client-%d", i)
		tok, err := b.admin.CreateToken(ctx, api.TokenRequest{Name: name, Role: "ci", TTL: "24h"})
		if err != nil {
			return fmt.Errorf("creating token %s: %w", name, err)
		}
		c := *b.admin
		c.Token = tok.Secret
		b.clients = append(b.clients, &c)
	}
	return nil
}

// poolManifest is the ClusterPool the bench applies (JSON, as `kobe pool apply` sends it).
// thawedSpares is the pool's spec.scaling.thawedSpares: the Ready members kept running (the
// spares beyond are frozen).
func poolManifest(name, version string, minReady, maxClusters, maxProvisions, thawedSpares int) []byte {
	m := map[string]any{
		"apiVersion": poolspec.APIVersion,
		"kind":       "ClusterPool",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			// No spec.backend.local: the local backend's default components (apiserver, with
			// its kine), the pool shape whose memory the report gives.
			"backend":                 map[string]any{"type": "local"},
			"cluster":                 map[string]any{"version": version},
			"ttl":                     "1h",
			"maxTtl":                  "2h",
			"maxConcurrentProvisions": maxProvisions,
			"scaling": map[string]any{
				"minReady":    minReady,
				"maxClusters": maxClusters,
				// Long enough that no claim fails while a level waits for its clusters, and no
				// warm member is scaled down during the run.
				"queueTimeout":   "10m",
				"scaleDownAfter": "1h",
				"thawedSpares":   thawedSpares,
			},
		},
	}
	data, _ := json.Marshal(m)
	return data
}

// applyPool creates the pool through PUT /v1/pools/{name}.
func (b *apiBench) applyPool(ctx context.Context, manifest []byte) error {
	_, _, err := b.admin.ApplyPool(ctx, manifest)
	return err
}

// waitQuiet waits until the pool has at least ready Ready members and nothing else going on:
// no member leased, being created or torn down, no claim queued. Requiring Leased == 0 after a
// release closes a race: until the pool has processed the release signals, it still counts the
// members as leased, so a quiet pool is one that has refilled after them. alive is checked on
// every poll so that a dead kobe stops the wait at once.
func (b *apiBench) waitQuiet(ctx context.Context, pool string, ready int, timeout time.Duration, alive func() error) (api.PoolView, error) {
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	var v api.PoolView
	for {
		var err error
		v, err = b.admin.GetPool(ctx, pool)
		if err != nil {
			return v, fmt.Errorf("pool %s: %w", pool, err)
		}
		if v.Ready >= ready && v.Leased == 0 && v.Creating == 0 && v.Recycling == 0 && v.QueueDepth == 0 {
			return v, nil
		}
		if v.ConsecutiveFailures >= 3 || v.Quarantined > 0 || v.Unhealthy > 0 {
			return v, fmt.Errorf("pool %s is failing: %s (consecutive failures %d, unhealthy %d, quarantined %d): %s",
				pool, v.Phase, v.ConsecutiveFailures, v.Unhealthy, v.Quarantined, v.LastFailureReason)
		}
		if err := alive(); err != nil {
			return v, err
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("pool %s not quiet with %d Ready after %s: %s", pool, ready, timeout, poolCounts(v))
		}
		if time.Since(lastLog) >= 15*time.Second {
			b.log.Printf("  pool %s: %s", pool, poolCounts(v))
			lastLog = time.Now()
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return v, err
		}
	}
}

func poolCounts(v api.PoolView) string {
	return fmt.Sprintf("%d Ready, %d leased, %d creating, %d recycling, %d queued (phase %s)", v.Ready, v.Leased, v.Creating, v.Recycling, v.QueueDepth, v.Phase)
}

// deletePool deletes the pool and waits until it is gone (404) and no instance of the host
// remains: directories and processes.
func (b *apiBench) deletePool(ctx context.Context, pool string, timeout time.Duration) error {
	if _, err := b.admin.DeletePool(ctx, pool); err != nil {
		return fmt.Errorf("deleting pool %s: %w", pool, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		_, err := b.admin.GetPool(ctx, pool)
		var apiErr *api.Error
		gone := errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound
		if err != nil && !gone {
			return fmt.Errorf("pool %s: %w", pool, err)
		}
		if gone {
			l, err := leaks.CountLocalInstances(ctx, b.stateDir, nil, "")
			if err != nil {
				return err
			}
			if len(l.Processes) == 0 && len(l.Dirs) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pool %s not deleted after %s", pool, timeout)
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// boundLease is a lease that reached Bound with a kubeconfig.
type boundLease struct {
	ID         string
	Instance   string
	Kubeconfig string
	// Latency is POST sent → Bound answer (with the kubeconfig) received. FirstRequest is POST
	// sent → the first request to the cluster with that kubeconfig answered, and
	// FirstRequestAlone that request's own time (they differ by the wait for the round, when
	// the first request waits for it: see bindRound).
	Latency           time.Duration
	FirstRequest      time.Duration
	FirstRequestAlone time.Duration
}

// leaseUntilBound is what a client does: POST /v1/leases, then long-poll GET
// /v1/leases/{id}?wait=30s until the lease is Bound and the answer carries its kubeconfig.
// Its first request with the kubeconfig is firstRequest's to make.
func leaseUntilBound(ctx context.Context, c *api.Client, pool string) (boundLease, error) {
	// An idempotency key, because the typed client retries a POST that got a 503: without
	// one, a retry after a 503 whose lease did start makes a second lease (seen under overload).
	key := make([]byte, 12)
	_, _ = rand.Read(key)
	t0 := time.Now()
	l, _, err := c.CreateLease(ctx, api.LeaseRequest{Pool: pool, TTL: "1h", IdempotencyKey: "bench-" + hex.EncodeToString(key)})
	if err != nil {
		return boundLease{}, fmt.Errorf("POST /v1/leases: %w", err)
	}
	for {
		switch l.Phase {
		case "Bound":
			if l.Kubeconfig != "" {
				return boundLease{ID: l.ID, Instance: l.ClusterName, Kubeconfig: l.Kubeconfig, Latency: time.Since(t0)}, nil
			}
		case "Pending":
		default:
			return boundLease{ID: l.ID}, fmt.Errorf("lease %s ended %s (reason %q) instead of Bound", l.ID, l.Phase, l.Reason)
		}
		id := l.ID
		if l, err = c.GetLease(ctx, id, 30*time.Second); err != nil {
			return boundLease{ID: id}, fmt.Errorf("GET /v1/leases/%s: %w", id, err)
		}
	}
}

// firstRequest makes a bound lease's first request with its kubeconfig (client-go asks the
// cluster for its version, on a new TLS connection) and records its times; t0 is the POST's.
func firstRequest(l *boundLease) error {
	t := time.Now()
	if _, err := serverVersion(l.Kubeconfig); err != nil {
		return fmt.Errorf("lease %s: its first request: %w", l.ID, err)
	}
	l.FirstRequestAlone = time.Since(t)
	l.FirstRequest = l.Latency + l.FirstRequestAlone
	return nil
}

// bindRound runs one round at a concurrency level: n clients lease at the same moment. Each
// then makes its first request with its kubeconfig: at once when atOnce (while the rest of the
// round still binds), else once every client of the round is bound, so that only binds compete
// with binds, as only Updates compete with Updates in the engine floor they are compared with.
// (Each first request costs its kube-apiserver and the client a TLS handshake and client-go's
// set-up: 50 of them beside 50 binds took a share of the 2 cores the binds were measured on.)
func (b *apiBench) bindRound(ctx context.Context, pool string, n int, atOnce bool) ([]boundLease, error) {
	out := make([]boundLease, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg, binds sync.WaitGroup
	binds.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start // every client is ready before the first request goes out
			out[i], errs[i] = leaseUntilBound(ctx, b.clients[i], pool)
			binds.Done()
			if errs[i] != nil {
				return
			}
			if !atOnce {
				binds.Wait()
			}
			errs[i] = firstRequest(&out[i])
		}()
	}
	close(start)
	wg.Wait()
	bound := 0
	for _, err := range errs {
		if err == nil {
			bound++
		}
	}
	if bound < n {
		return out, fmt.Errorf("%d of %d clients got a kubeconfig: %w", bound, n, errors.Join(errs...))
	}
	return out, nil
}

// release deletes the leases (DELETE /v1/leases/{id}), each with the client that owns it.
func (b *apiBench) release(ctx context.Context, leases []boundLease) error {
	var errs []error
	for i, l := range leases {
		if l.ID == "" {
			continue
		}
		if err := b.clients[i].ReleaseLease(ctx, l.ID); err != nil {
			errs = append(errs, fmt.Errorf("DELETE /v1/leases/%s: %w", l.ID, err))
		}
	}
	return errors.Join(errs...)
}

// serverVersion proves a kubeconfig works: client-go asks the cluster for its version.
func serverVersion(kubeconfig string) (string, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return "", fmt.Errorf("lease kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("lease kubeconfig does not work: %w", err)
	}
	return v.GitVersion, nil
}

// lifecycle is one timed lease lifecycle.
type lifecycle struct {
	total, bind, teardown time.Duration
}

// oneLifecycle: POST → Bound (kubeconfig) → DELETE → the lease is Released and its instance
// is torn down. The lease workflow writes Released when it has revoked the credential and
// signalled the pool, before the teardown runs (lease/workflows.go), so "torn down" is checked
// on the host: the instance directory removed (the local backend removes it after killing
// the processes) and no process naming it.
func (b *apiBench) oneLifecycle(ctx context.Context, c *api.Client, pool string) (lifecycle, error) {
	t0 := time.Now()
	l, err := leaseUntilBound(ctx, c, pool)
	if err == nil {
		err = firstRequest(&l) // its kubeconfig works
	}
	if err != nil {
		return lifecycle{}, err
	}
	bound := time.Now()
	if l.Instance == "" {
		return lifecycle{}, fmt.Errorf("lease %s is Bound without an instance (cluster_name)", l.ID)
	}
	if err := c.ReleaseLease(ctx, l.ID); err != nil {
		return lifecycle{}, fmt.Errorf("DELETE /v1/leases/%s: %w", l.ID, err)
	}
	dir := filepath.Join(leaks.InstancesDir(b.stateDir), l.Instance)
	released := false
	for {
		if !released {
			v, err := c.GetLease(ctx, l.ID, 0)
			if err != nil {
				return lifecycle{}, fmt.Errorf("GET /v1/leases/%s: %w", l.ID, err)
			}
			switch v.Phase {
			case "Released":
				released = true
			case "Bound":
			default:
				return lifecycle{}, fmt.Errorf("lease %s: %s (reason %q) after DELETE, want Released", l.ID, v.Phase, v.Reason)
			}
		}
		if released {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && len(leaks.ProcessesNaming(dir+string(os.PathSeparator))) == 0 {
				gone := time.Now()
				return lifecycle{total: gone.Sub(t0), bind: bound.Sub(t0), teardown: gone.Sub(bound)}, nil
			}
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return lifecycle{}, fmt.Errorf("lease %s: waiting for instance %s to be torn down: %w", l.ID, l.Instance, err)
		}
	}
}

// lifecycles runs count lifecycles from n concurrent clients and returns them with the wall
// time from the first request to the last teardown.
func (b *apiBench) lifecycles(ctx context.Context, pool string, count, n int) ([]lifecycle, time.Duration, error) {
	work := make(chan int)
	var mu sync.Mutex
	var out []lifecycle
	var firstErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				lc, err := b.oneLifecycle(ctx, b.clients[i], pool)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						// One failure fails the measurement: stop the others (whose errors,
						// "context canceled", would only hide this one).
						firstErr = err
						cancel()
					}
				} else {
					out = append(out, lc)
					if len(out)%max(1, count/5) == 0 {
						b.log.Printf("  %d/%d lifecycles", len(out), count)
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := 0; i < count; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, 0, firstErr
	}
	if err := ctx.Err(); err != nil || len(out) != count {
		return nil, 0, fmt.Errorf("lifecycles interrupted after %d of %d: %v", len(out), count, err)
	}
	return out, elapsed, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
