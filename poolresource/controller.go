package poolresource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
	"github.com/kunobi-ninja/kobe/server"
)

// clusterPools is the resource the controller watches.
var clusterPools = schema.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Resource: "clusterpools"}

// Defaults of Options.
const (
	DefaultLeaseNamespace = "default"
	// LeaseName is the Lease object the controllers of one kobe installation elect a leader with.
	LeaseName = "kobe-clusterpool-controller"
	// DefaultPollInterval: how often a pool's state is read back for its resource's status.
	DefaultPollInterval = 2 * time.Second
	// DefaultStatusInterval: the least time between two status writes of one resource.
	DefaultStatusInterval = 2 * time.Second
)

// Options configure the controller.
type Options struct {
	// Config reaches the Kubernetes API server that holds the ClusterPool resources.
	Config *rest.Config
	// Server is the kobe API server whose pools the resources are: the controller changes them
	// through its ApplyPool and DeletePool, as PUT and DELETE /v1/pools/{name} do.
	Server *server.Server
	// LeaseNamespace holds the leader election's Lease (DefaultLeaseNamespace when empty).
	LeaseNamespace string
	// Identity names this process in the Lease (host name and pid when empty).
	Identity string
	Logger   *zap.Logger
	// PollInterval and StatusInterval: DefaultPollInterval and DefaultStatusInterval when 0.
	PollInterval, StatusInterval time.Duration
}

// Run elects a leader among the kobe processes pointed at the same API server and, while this
// one leads, keeps the pools in step with the ClusterPool resources. It returns when ctx ends
// (the Lease is released then, so that another process takes over at once).
func Run(ctx context.Context, opts Options) error {
	if opts.Config == nil || opts.Server == nil {
		return errors.New("poolresource: a Kubernetes config and a kobe server are required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = DefaultLeaseNamespace
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = DefaultStatusInterval
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("poolresource: %w", err)
	}
	dyn, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("poolresource: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.LeaseNamespace, Name: LeaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	for ctx.Err() == nil {
		// A term's controller runs in a goroutine of RunOrDie's, which RunOrDie does not wait
		// for: the next election waits for it, so that one process never runs two terms at
		// once, and a term that had not begun when RunOrDie returned never begins.
		var begun atomic.Bool
		termDone := make(chan struct{})
		// RunOrDie returns when this process stops leading (or never led before ctx ended):
		// it then stands for election again.
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   15 * time.Second,
			RenewDeadline:   10 * time.Second,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Name:            LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					if !begun.CompareAndSwap(false, true) {
						return
					}
					defer close(termDone)
					opts.Logger.Info("leading the ClusterPool controller", zap.String("identity", opts.Identity))
					c := &controller{opts: opts, resources: dyn.Resource(clusterPools), deleteSent: map[string]int64{}, statusWritten: map[string]time.Time{}}
					c.run(ctx, dyn)
				},
				OnStoppedLeading: func() {
					opts.Logger.Info("no longer leading the ClusterPool controller", zap.String("identity", opts.Identity))
				},
			},
		})
		if !begun.CompareAndSwap(false, true) {
			<-termDone
		}
	}
	return nil
}

// controller is one term of leadership: its caches live as long as the term.
type controller struct {
	opts      Options
	resources dynamic.NamespaceableResourceInterface
	lister    cache.GenericLister

	mu sync.Mutex
	// deleteSent is the pool row generation each resource's pool was told to drain at, so that
	// a drain is asked for once while the pool's workflow takes it in.
	deleteSent map[string]int64
	// statusWritten is when each resource's status was last written (at most one write per
	// StatusInterval).
	statusWritten map[string]time.Time
}

// run watches the resources and reconciles them one at a time until ctx ends.
func (c *controller) run(ctx context.Context, dyn dynamic.Interface) {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	informer := factory.ForResource(clusterPools)
	c.lister = informer.Lister()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		name, shutdown := queue.Get()
		if shutdown {
			return
		}
		again, err := c.reconcile(ctx, name)
		switch {
		case err != nil && ctx.Err() == nil:
			c.opts.Logger.Warn("ClusterPool not reconciled; trying again", zap.String("name", name), zap.Error(err))
			queue.AddRateLimited(name)
		case again > 0:
			queue.Forget(name)
			queue.AddAfter(name, again)
		default:
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// reconcile does the next step for one resource; it returns when to look at it again (0: when
// it changes).
func (c *controller) reconcile(ctx context.Context, name string) (time.Duration, error) {
	obj, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return 0, fmt.Errorf("clusterpool %s: unexpected object %T", name, obj)
	}
	var cp v1alpha1.ClusterPool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cp); err != nil {
		return 0, fmt.Errorf("clusterpool %s: %w", name, err)
	}
	srv := c.opts.Server
	row, found, err := srv.PoolRecord(ctx, name)
	if err != nil {
		return 0, err
	}
	manifest, manifestErr := cp.Manifest()
	c.mu.Lock()
	sentAt, sent := c.deleteSent[name]
	c.mu.Unlock()
	o := observed{
		Deleting:          cp.DeletionTimestamp != nil,
		HasFinalizer:      slices.Contains(cp.Finalizers, Finalizer),
		Generation:        cp.Generation,
		RefusedGeneration: refusedGeneration(cp.Status),
		PoolExists:        found,
		PoolManagedBy:     row.ManagedBy,
		SameSpec:          found && manifestErr == nil && sameManifest(row.Spec, manifest),
		DeleteSent:        found && sent && sentAt == row.Generation,
	}
	by := server.Actor{Name: lastWriter(cp.ManagedFields)}
	act := decide(name, o)
	var outcome applyOutcome
	switch act {
	case actAddFinalizer:
		u = u.DeepCopy()
		u.SetFinalizers(append(u.GetFinalizers(), Finalizer))
		_, err := c.resources.Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		return 0, err // the update comes back as an event
	case actRemoveFinalizer:
		u = u.DeepCopy()
		u.SetFinalizers(slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == Finalizer }))
		_, err := c.resources.Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			c.forget(name)
			c.opts.Logger.Info("ClusterPool released: its pool is gone", zap.String("name", name))
		}
		return 0, err
	case actDelete:
		gone, err := srv.DeletePool(ctx, name, ManagedBy(name), by)
		var ce *server.PoolChangeError
		if errors.As(err, &ce) && ce.Refused() {
			// Not found (gone since it was read) or changed meanwhile: read it again.
			return c.opts.PollInterval, nil
		}
		if err != nil {
			return 0, err
		}
		c.opts.Logger.Info("ClusterPool deleted: draining its pool", zap.String("name", name), zap.String("actor", by.Name))
		if gone {
			return c.opts.PollInterval, nil
		}
		c.mu.Lock()
		c.deleteSent[name] = row.Generation
		c.mu.Unlock()
	case actApply:
		outcome = applyOutcome{Generation: cp.Generation}
		if manifestErr != nil {
			outcome.Refused, outcome.Message = true, manifestErr.Error()
			break
		}
		created, err := srv.ApplyPool(ctx, manifest, ManagedBy(name), by)
		var ce *server.PoolChangeError
		switch {
		case errors.As(err, &ce) && ce.Refused():
			outcome.Refused, outcome.Message = true, ce.Detail
			c.opts.Logger.Info("ClusterPool refused: its spec stays unapplied until it changes", zap.String("name", name),
				zap.Int64("generation", cp.Generation), zap.String("why", ce.Detail))
		case err != nil:
			outcome.Failed, outcome.Message = true, err.Error()
		default:
			c.opts.Logger.Info("ClusterPool applied", zap.String("name", name), zap.Int64("generation", cp.Generation),
				zap.Bool("created", created), zap.String("actor", by.Name))
		}
	case actNothing:
		if o.PoolExists && o.PoolManagedBy == ManagedBy(name) && o.SameSpec {
			outcome = applyOutcome{Generation: cp.Generation}
		}
	}
	again, err := c.writeStatus(ctx, u, cp.Status, outcome)
	if err != nil {
		return 0, err
	}
	if outcome.Failed {
		return 0, errors.New(outcome.Message) // tried again with the queue's backoff
	}
	if again == 0 {
		again = c.opts.PollInterval
	}
	return again, nil
}

// writeStatus writes the resource's status when it changed, at most once per StatusInterval; it
// returns how long to wait before a write it put off.
func (c *controller) writeStatus(ctx context.Context, u *unstructured.Unstructured, prev v1alpha1.ClusterPoolStatus, outcome applyOutcome) (time.Duration, error) {
	name := u.GetName()
	view, found, err := c.opts.Server.PoolView(ctx, name)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	st := statusOf(prev, view, found, outcome, now)
	if equality.Semantic.DeepEqual(st, prev) {
		return 0, nil
	}
	c.mu.Lock()
	last := c.statusWritten[name]
	c.mu.Unlock()
	// What kobe made of the spec is written at once; the pool's counts wait for the interval.
	urgent := st.ObservedGeneration != prev.ObservedGeneration ||
		!equality.Semantic.DeepEqual(meta.FindStatusCondition(st.Conditions, ConditionApplied), meta.FindStatusCondition(prev.Conditions, ConditionApplied))
	if wait := c.opts.StatusInterval - now.Sub(last); wait > 0 && !urgent {
		return wait, nil
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return 0, err
	}
	u = u.DeepCopy()
	u.Object["status"] = raw
	if _, err := c.resources.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.statusWritten[name] = now
	c.mu.Unlock()
	return 0, nil
}

// forget drops what the controller remembers of a resource that is gone.
func (c *controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.deleteSent, name)
	delete(c.statusWritten, name)
}

// sameManifest says whether a pool's stored manifest (JSON, as pool.Apply wrote it) is the
// manifest m. Both are read back through poolspec, so that the store's encoding (PostgreSQL's
// JSONB reorders keys) is not taken for a change. (Validation does not change a manifest, so
// the stored one is m's encoding as it was applied.)
func sameManifest(stored []byte, m *poolspec.ClusterPool) bool {
	normal := func(doc []byte) ([]byte, bool) {
		parsed, err := poolspec.Parse(doc)
		if err != nil {
			return nil, false
		}
		out, err := json.Marshal(parsed)
		return out, err == nil
	}
	ours, err := json.Marshal(m)
	if err != nil {
		return false
	}
	a, okA := normal(stored)
	b, okB := normal(ours)
	return okA && okB && bytes.Equal(a, b)
}
