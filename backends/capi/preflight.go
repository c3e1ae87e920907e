package capi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kunobi-ninja/kobe/backends"
)

// Preflight implements backends.Preflighter: the spec is judged against the management
// cluster, with no side effects. Discovery says whether the infrastructure kind (pass-through)
// is served; the ClusterClass and its variables are read (topology); then every object Create
// would make is created with dryRun=All, so the CRD schemas and the providers' webhooks judge
// infrastructureSpec, the machine template, the variables' values and the version, as they
// will at Create.
func (b *Backend) Preflight(ctx context.Context, spec backends.InstanceSpec) error {
	o, err := b.validate(spec)
	if err != nil {
		return err
	}
	return b.preflight(ctx, spec, o)
}

func (b *Backend) preflight(ctx context.Context, spec backends.InstanceSpec, o Options) error {
	if _, err := b.kube.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.namespace: the management cluster has no namespace %q", o.Namespace))
		}
		return fmt.Errorf("capi backend: the management cluster does not answer: %w", err)
	}
	if _, err := b.mapping(schema.GroupVersionKind{Group: clusterGroup, Version: clusterVersion, Kind: "Cluster"}); err != nil {
		return fmt.Errorf("capi backend: the management cluster does not serve %s/%s Cluster (is Cluster API installed?): %v", clusterGroup, clusterVersion, err)
	}
	cluster, err := renderCluster(spec.ID, spec.Pool, spec.KubernetesVersion, o)
	if err != nil {
		return err
	}
	if o.Topology != nil {
		if err := b.checkClass(ctx, o); err != nil {
			return err
		}
		return b.dryRun(ctx, cluster, "spec.backend.capi.topology")
	}
	gv, _ := schema.ParseGroupVersion(o.InfrastructureAPIVersion)
	m, err := b.mapping(gv.WithKind(o.InfrastructureKind))
	if err != nil {
		return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.infrastructureKind: the management cluster serves no %s in %s (is its infrastructure provider installed?)%s",
			o.InfrastructureKind, o.InfrastructureAPIVersion, b.servedKinds(gv)))
	}
	if o.InfrastructurePlural != "" && o.InfrastructurePlural != m.Resource.Resource {
		return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.infrastructurePlural: %q, but the management cluster serves %s as %q", o.InfrastructurePlural, o.InfrastructureKind, m.Resource.Resource))
	}
	if _, err := b.mapping(gv.WithKind(o.ControlPlane.MachineTemplateKind)); err != nil {
		return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.controlPlane.machineTemplateKind: the management cluster serves no %s in %s%s",
			o.ControlPlane.MachineTemplateKind, o.InfrastructureAPIVersion, b.servedKinds(gv)))
	}
	if _, err := b.mapping(schema.GroupVersionKind{Group: controlPlaneGroup, Version: "v1beta2", Kind: controlPlaneKind}); err != nil {
		return fmt.Errorf("capi backend: the management cluster does not serve %s KubeadmControlPlane (is the kubeadm control-plane provider installed?)", controlPlaneGroup)
	}
	objs := b.passThroughObjects(spec, o)
	fields := []string{"spec.backend.capi.infrastructureSpec", "spec.backend.capi.controlPlane.machineTemplateSpec", "spec.backend.capi.controlPlane"}
	for i, obj := range objs {
		if err := b.dryRun(ctx, obj, fields[i]); err != nil {
			return err
		}
	}
	return b.dryRun(ctx, cluster, "spec.backend.capi")
}

func (b *Backend) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		// CRDs installed after the cache was filled.
		b.mapper.Reset()
		m, err = b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// servedKinds names the kinds of a group version, for an error message.
func (b *Backend) servedKinds(gv schema.GroupVersion) string {
	l, err := b.kube.Discovery().ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return fmt.Sprintf(" (the management cluster does not serve %s at all)", gv)
	}
	var kinds []string
	for _, r := range l.APIResources {
		if !strings.Contains(r.Name, "/") {
			kinds = append(kinds, r.Kind)
		}
	}
	sort.Strings(kinds)
	return fmt.Sprintf(" (it serves: %s)", strings.Join(kinds, ", "))
}

// checkClass reads the ClusterClass: it must exist, be reconciled (its variables known), know
// every variable given and every worker class named.
func (b *Backend) checkClass(ctx context.Context, o Options) error {
	t := o.Topology
	ns := t.ClassNamespace
	if ns == "" {
		ns = o.Namespace
	}
	cc, err := b.dyn.Resource(clusterClassGVR).Namespace(ns).Get(ctx, t.Class, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		there := "none"
		if list, err := b.dyn.Resource(clusterClassGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil && len(list.Items) > 0 {
			var names []string
			for _, c := range list.Items {
				names = append(names, c.GetName())
			}
			sort.Strings(names)
			there = strings.Join(names, ", ")
		}
		return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.topology.class: the management cluster has no ClusterClass %q in namespace %q (there: %s)", t.Class, ns, there))
	}
	if err != nil {
		return fmt.Errorf("spec.backend.capi.topology.class: reading ClusterClass %s/%s: %w", ns, t.Class, err)
	}
	observed, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
	if observed != cc.GetGeneration() {
		return fmt.Errorf("spec.backend.capi.topology.class: ClusterClass %s/%s is not reconciled yet (generation %d, observed %d): try again shortly", ns, t.Class, cc.GetGeneration(), observed)
	}
	known := map[string]bool{}
	vars, _, _ := unstructured.NestedSlice(cc.Object, "status", "variables")
	for _, v := range vars {
		if m, ok := v.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				known[n] = true
			}
		}
	}
	for i, v := range t.Variables {
		if !known[v.Name] {
			return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.topology.variables[%d].name: ClusterClass %s/%s has no variable %q (it has: %s)", i, ns, t.Class, v.Name, keys(known)))
		}
	}
	classes := map[string]bool{}
	mds, _, _ := unstructured.NestedSlice(cc.Object, "spec", "workers", "machineDeployments")
	for _, md := range mds {
		if m, ok := md.(map[string]any); ok {
			if c, ok := m["class"].(string); ok {
				classes[c] = true
			}
		}
	}
	for i, md := range t.Workers {
		if !classes[md.Class] {
			return backends.InvalidSpec(fmt.Errorf("spec.backend.capi.topology.workers[%d].class: ClusterClass %s/%s has no machine deployment class %q (it has: %s)", i, ns, t.Class, md.Class, keys(classes)))
		}
	}
	return nil
}

func keys(m map[string]bool) string {
	if len(m) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// dryRun creates obj with dryRun=All: admission (schemas, webhooks) runs, nothing is stored.
func (b *Backend) dryRun(ctx context.Context, obj *unstructured.Unstructured, field string) error {
	gvr, err := b.resourceFor(obj)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", field, obj.GetKind(), obj.GetName(), err)
	}
	_, err = b.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return backends.InvalidSpec(fmt.Errorf("%s: the management cluster refuses the %s: %s", field, obj.GetKind(), statusMessage(err)))
	default:
		return fmt.Errorf("capi backend: checking the %s with the management cluster: %w", obj.GetKind(), err)
	}
}

func statusMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		if st.Details != nil && len(st.Details.Causes) > 0 {
			var parts []string
			for _, c := range st.Details.Causes {
				parts = append(parts, strings.TrimSpace(c.Field+": "+c.Message))
			}
			return strings.Join(parts, "; ")
		}
		return st.Message
	}
	return err.Error()
}
