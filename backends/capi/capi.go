// Package capi is kobe's Cluster API backend: an instance is a Cluster in a management cluster
// (a worker's $KOBE_CAPI_KUBECONFIG, or the in-cluster config of a worker running in it),
// made by whatever infrastructure provider is installed there. Two forms of spec.backend.capi
// (see Options): the upstream pass-through form (an infrastructure object given as is, plus a
// KubeadmControlPlane) and a ClusterClass topology.
//
// kobe talks to the management cluster with unstructured objects only: the Cluster API
// controllers' module (and its controller-runtime, k8s.io pins) never enters kobe's go.mod.
//
// Ready is the Cluster's v1beta2 Available condition plus its <cluster>-kubeconfig Secret;
// the conditions on the way are reported as reason codes (status.go). Delete waits until the
// Cluster and everything that carries its name (CAPI's objects, owned Secrets) is gone.
package capi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/wait"
)

// Name is spec.backend.type for this backend.
const Name = "capi"

// KubeconfigEnv names the management cluster's kubeconfig file for the workers that run the
// backend; without it (and outside a cluster) the backend refuses every spec, saying why.
const KubeconfigEnv = "KOBE_CAPI_KUBECONFIG"

func init() {
	backends.Register(backends.Factory{
		Name:        Name,
		Description: "Cluster API: a Cluster (pass-through infrastructure or a ClusterClass topology) in a management cluster",
		New: func(backends.Environment) (backends.RuntimeBackend, error) {
			cfg, why := managementConfig()
			if cfg == nil {
				return &Backend{unavailable: why}, nil
			}
			return New(Config{REST: cfg})
		},
		Prototype: &Backend{},
	})
}

// managementConfig finds the management cluster: $KOBE_CAPI_KUBECONFIG, else in-cluster.
func managementConfig() (*rest.Config, string) {
	if path := os.Getenv(KubeconfigEnv); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Sprintf("$%s: %v", KubeconfigEnv, err)
		}
		return cfg, ""
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, ""
	}
	return nil, fmt.Sprintf("this worker has no management cluster (set $%s to its kubeconfig, or run the worker in it)", KubeconfigEnv)
}

// Config configures the backend.
type Config struct {
	// REST reaches the management cluster, with rights over Cluster API objects and Secrets.
	REST *rest.Config
	// PollInterval of WaitReady and Delete (default 2 s).
	PollInterval time.Duration
}

// Backend manages Clusters in one management cluster. It keeps no state of its own: every
// answer comes from the management cluster, so any worker can serve any instance.
type Backend struct {
	unavailable string // why there is no management cluster; empty when there is one

	kube   kubernetes.Interface
	dyn    dynamic.Interface
	cached discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	poll   time.Duration

	locks backends.InstanceLocks // Create/Delete per id
}

var (
	_ backends.RuntimeBackend = (*Backend)(nil)
	_ backends.Preflighter    = (*Backend)(nil)
)

// New connects the backend to a management cluster (lazily: nothing is asked until used).
func New(cfg Config) (*Backend, error) {
	if cfg.REST == nil {
		return nil, errors.New("capi backend: no management cluster config")
	}
	rc := rest.CopyConfig(cfg.REST)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	// Listing every Cluster API kind (Leftovers) draws deprecation warnings for the kinds a
	// provider deprecates (CAPD's Docker*), once per list: noise in a worker's log.
	rc.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("capi backend: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("capi backend: %w", err)
	}
	cached := memory.NewMemCacheClient(kube.Discovery())
	b := &Backend{
		kube: kube, dyn: dyn, cached: cached,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached),
		poll:   cfg.PollInterval,
	}
	if b.poll <= 0 {
		b.poll = 2 * time.Second
	}
	return b, nil
}

// Name implements backends.RuntimeBackend.
func (b *Backend) Name() string { return Name }

var idPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate implements backends.RuntimeBackend: everything that can be judged without the
// management cluster. Preflight asks the management cluster the rest.
func (b *Backend) Validate(spec backends.InstanceSpec) error {
	_, err := b.validate(spec)
	return err
}

func (b *Backend) validate(spec backends.InstanceSpec) (Options, error) {
	if b.unavailable != "" {
		return Options{}, errors.New("capi backend: " + b.unavailable)
	}
	// The Cluster is named after the instance; KCP appends "-control-plane" and a suffix.
	if !idPattern.MatchString(spec.ID) || len(spec.ID) > 40 {
		return Options{}, backends.InvalidSpec(fmt.Errorf("instance id %q: must be a DNS label of at most 40 characters", spec.ID))
	}
	if !versionPattern.MatchString(spec.KubernetesVersion) {
		return Options{}, backends.InvalidSpec(fmt.Errorf("spec.cluster.version: %q is not a Kubernetes version such as v1.37.0 (the Cluster's version)", spec.KubernetesVersion))
	}
	o, err := ParseOptions(spec.Options)
	return o, backends.InvalidSpec(err)
}

// Create implements backends.RuntimeBackend: after Preflight, the Cluster, then (pass-through)
// the infrastructure object, the control plane's machine template and the KubeadmControlPlane,
// each owned by the Cluster. Every object is created if absent, so a retry after a crash
// completes what the first call began.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.InstanceStatus, error) {
	o, err := b.validate(spec)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	defer b.locks.Lock(spec.ID)()
	existing, err := b.findCluster(ctx, spec.ID)
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return backends.InstanceStatus{}, err
	}
	if existing == nil {
		// Only a new instance is judged against the management cluster: an existing one was
		// judged when it was created (and a ClusterClass edited since must not block a retry).
		if err := b.preflight(ctx, spec, o); err != nil {
			return backends.InstanceStatus{}, err
		}
	}
	cluster := existing
	if cluster == nil {
		want, err := renderCluster(spec.ID, spec.Pool, spec.KubernetesVersion, o)
		if err != nil {
			return backends.InstanceStatus{}, err
		}
		cluster, err = b.dyn.Resource(clusterGVR).Namespace(o.Namespace).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cluster, err = b.dyn.Resource(clusterGVR).Namespace(o.Namespace).Get(ctx, spec.ID, metav1.GetOptions{})
			if err == nil && cluster.GetLabels()[LabelInstance] != spec.ID {
				return backends.InstanceStatus{}, fmt.Errorf("a Cluster %s/%s exists that kobe did not create", o.Namespace, spec.ID)
			}
		}
		if err != nil {
			return backends.InstanceStatus{}, fmt.Errorf("creating Cluster %s/%s: %w", o.Namespace, spec.ID, err)
		}
	}
	if o.Topology == nil {
		for _, obj := range b.passThroughObjects(spec, o) {
			ownedBy(obj, cluster)
			if err := b.createIfAbsent(ctx, obj); err != nil {
				return backends.InstanceStatus{}, err
			}
		}
	}
	return b.statusOfCluster(ctx, spec.ID, cluster), nil
}

// passThroughObjects are the objects beside the Cluster in the pass-through form. Errors were
// ruled out by ParseOptions (the JSON sections are objects).
func (b *Backend) passThroughObjects(spec backends.InstanceSpec, o Options) []*unstructured.Unstructured {
	infra, _ := renderInfrastructure(spec.ID, spec.Pool, o)
	tmpl, _ := renderMachineTemplate(spec.ID, spec.Pool, o)
	return []*unstructured.Unstructured{infra, tmpl, renderControlPlane(spec.ID, spec.Pool, spec.KubernetesVersion, o)}
}

func (b *Backend) resourceFor(obj *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gvk := obj.GroupVersionKind()
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		b.mapper.Reset()
		if m, err = b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return schema.GroupVersionResource{}, err
		}
	}
	return m.Resource, nil
}

func (b *Backend) createIfAbsent(ctx context.Context, obj *unstructured.Unstructured) error {
	gvr, err := b.resourceFor(obj)
	if err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	_, err = b.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// findCluster finds an instance's Cluster by kobe's label, in whichever namespace its pool
// put it.
func (b *Backend) findCluster(ctx context.Context, id string) (*unstructured.Unstructured, error) {
	list, err := b.dyn.Resource(clusterGVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: LabelInstance + "=" + id})
	if err != nil {
		return nil, fmt.Errorf("listing Clusters: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, backends.ErrNotFound
	}
	return &list.Items[0], nil
}

func (b *Backend) kubeconfigSecret(ctx context.Context, c *unstructured.Unstructured) ([]byte, error) {
	s, err := b.kube.CoreV1().Secrets(c.GetNamespace()).Get(ctx, c.GetName()+"-kubeconfig", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	kc := s.Data["value"]
	if len(kc) == 0 {
		return nil, fmt.Errorf("Secret %s/%s-kubeconfig has no value", c.GetNamespace(), c.GetName())
	}
	return kc, nil
}

// statusOfCluster maps the Cluster and marks it once it was seen Ready (see readyAnnotation).
func (b *Backend) statusOfCluster(ctx context.Context, id string, c *unstructured.Unstructured) backends.InstanceStatus {
	_, err := b.kubeconfigSecret(ctx, c)
	st := statusOf(id, c, err == nil)
	if st.Phase == backends.PhaseReady {
		if _, seen := c.GetAnnotations()[readyAnnotation]; !seen {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{readyAnnotation: time.Now().UTC().Format(time.RFC3339)}}})
			// Best effort: without the mark a later outage reads as Creating, not Unhealthy.
			_, _ = b.dyn.Resource(clusterGVR).Namespace(c.GetNamespace()).Patch(ctx, c.GetName(), "application/merge-patch+json", patch, metav1.PatchOptions{})
		}
	}
	return st
}

// Status implements backends.RuntimeBackend.
func (b *Backend) Status(ctx context.Context, id string) (backends.InstanceStatus, error) {
	if b.unavailable != "" {
		return backends.InstanceStatus{}, errors.New("capi backend: " + b.unavailable)
	}
	c, err := b.findCluster(ctx, id)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	return b.statusOfCluster(ctx, id, c), nil
}

// WaitReady implements backends.RuntimeBackend. Creating and Unhealthy are waited through (a
// Cluster's conditions go back and forth while it comes up); Failed ends the wait.
func (b *Backend) WaitReady(ctx context.Context, id string, progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return wait.Ready(ctx, id, b.poll, b.Status, progress)
}

// Delete implements backends.RuntimeBackend: deletes the Cluster (CAPI's finalizers delete its
// machines, control plane and infrastructure; the garbage collector what it owns) and waits
// until nothing that carries the instance's name is left, or ctx ends.
func (b *Backend) Delete(ctx context.Context, id string) error {
	if b.unavailable != "" {
		return errors.New("capi backend: " + b.unavailable)
	}
	defer b.locks.Lock(id)()
	c, err := b.findCluster(ctx, id)
	switch {
	case errors.Is(err, backends.ErrNotFound):
	case err != nil:
		return err
	case c.GetDeletionTimestamp() == nil:
		policy := metav1.DeletePropagationBackground
		err := b.dyn.Resource(clusterGVR).Namespace(c.GetNamespace()).Delete(ctx, c.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Cluster %s/%s: %w", c.GetNamespace(), c.GetName(), err)
		}
	}
	for {
		left, err := b.Leftovers(ctx, id)
		if err == nil && len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("still there: %s", strings.Join(left, ", "))
			}
			return fmt.Errorf("deleting instance %s: %v: %w", id, err, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}

// Leftovers lists what remains of an instance in the management cluster: every object of a
// Cluster API group (cluster.x-k8s.io and its *.cluster.x-k8s.io providers) labelled with the
// instance (by kobe) or with its cluster name (by CAPI), and the Secrets labelled so or owned
// by a Cluster of that name. Empty once Delete is done.
func (b *Backend) Leftovers(ctx context.Context, id string) ([]string, error) {
	resources, err := b.capiResources()
	if err != nil {
		return nil, err
	}
	var left []string
	seen := map[string]bool{}
	add := func(kind string, o metav1.Object) {
		k := fmt.Sprintf("%s %s/%s", kind, o.GetNamespace(), o.GetName())
		if !seen[k] {
			seen[k] = true
			left = append(left, k)
		}
	}
	for _, sel := range []string{LabelInstance + "=" + id, LabelClusterName + "=" + id} {
		for _, r := range resources {
			list, err := b.dyn.Resource(r.gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue // a CRD removed since discovery
				}
				return nil, fmt.Errorf("listing %s: %w", r.gvr.Resource, err)
			}
			for i := range list.Items {
				add(r.kind, &list.Items[i])
			}
		}
	}
	secrets, err := b.kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Secrets: %w", err)
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		owned := s.Labels[LabelClusterName] == id || s.Labels[LabelInstance] == id
		for _, ref := range s.OwnerReferences {
			if ref.Kind == "Cluster" && strings.HasPrefix(ref.APIVersion, clusterGroup+"/") && ref.Name == id {
				owned = true
			}
		}
		if owned {
			add("Secret", s)
		}
	}
	sort.Strings(left)
	return left, nil
}

type capiResource struct {
	gvr  schema.GroupVersionResource
	kind string
}

// capiResources lists the namespaced, listable resources of the Cluster API groups the
// management cluster serves (core, bootstrap, control plane, infrastructure, addons…).
func (b *Backend) capiResources() ([]capiResource, error) {
	lists, err := b.cached.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		b.cached.Invalidate()
		return nil, fmt.Errorf("discovery of the management cluster: %w", err)
	}
	var out []capiResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || (gv.Group != clusterGroup && !strings.HasSuffix(gv.Group, "."+clusterGroup)) {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !contains(r.Verbs, "list") {
				continue
			}
			out = append(out, capiResource{gvr: gv.WithResource(r.Name), kind: r.Kind})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the management cluster serves no cluster.x-k8s.io resources: is Cluster API installed?")
	}
	return out, nil
}

// InstanceIDs lists the instances of this backend in the management cluster (the test
// harness deletes what a test left).
func (b *Backend) InstanceIDs() []string {
	if b.unavailable != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := b.dyn.Resource(clusterGVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: LabelInstance})
	if err != nil {
		return nil
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.GetLabels()[LabelInstance])
	}
	sort.Strings(ids)
	return ids
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
