package capi

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// API groups and versions kobe writes (Cluster API v1beta2 contract).
const (
	clusterGroup      = "cluster.x-k8s.io"
	clusterVersion    = "v1beta2"
	controlPlaneGroup = "controlplane.cluster.x-k8s.io"
	controlPlaneKind  = "KubeadmControlPlane"
)

var (
	clusterGVR      = schema.GroupVersionResource{Group: clusterGroup, Version: clusterVersion, Resource: "clusters"}
	clusterClassGVR = schema.GroupVersionResource{Group: clusterGroup, Version: clusterVersion, Resource: "clusterclasses"}
)

// Labels kobe puts on every object it creates, and CAPI's own cluster label, by which the
// objects CAPI creates for a cluster are found.
const (
	LabelInstance    = "kobe.kunobi.ninja/instance"
	LabelPool        = "kobe.kunobi.ninja/pool"
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
)

// The networks of every cluster (the workload clusters' own, never routed on this host).
var (
	podCIDRs     = []any{"192.168.0.0/16"}
	serviceCIDRs = []any{"10.128.0.0/12"}
)

func controlPlaneName(id string) string { return id + "-control-plane" }

func labels(id, pool string) map[string]any {
	return map[string]any{LabelInstance: id, LabelPool: pool}
}

// createdByAnnotation is on every object kobe creates. Besides saying who made it, it gives
// every object a non-empty annotations map: CAPD's in-memory DevCluster reconciler (v1.14.2)
// writes into its object's annotations without creating the map, and panics on an object that
// has none (objects CAPI clones from a ClusterClass always have some).
const createdByAnnotation = "kobe.kunobi.ninja/created-by"

func newObject(apiVersion, kind, namespace, name string, lbl map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]any{"name": name, "namespace": namespace, "labels": lbl,
			"annotations": map[string]any{createdByAnnotation: "kobe"}},
	}}
}

// renderCluster is the Cluster of an instance: references to the objects renderOwned creates
// (pass-through), or the topology of a ClusterClass.
func renderCluster(id, pool, k8sVersion string, o Options) (*unstructured.Unstructured, error) {
	c := newObject(clusterGroup+"/"+clusterVersion, "Cluster", o.Namespace, id, labels(id, pool))
	spec := map[string]any{
		"clusterNetwork": map[string]any{
			"pods":          map[string]any{"cidrBlocks": podCIDRs},
			"services":      map[string]any{"cidrBlocks": serviceCIDRs},
			"serviceDomain": "cluster.local",
		},
	}
	if t := o.Topology; t != nil {
		classRef := map[string]any{"name": t.Class}
		if t.ClassNamespace != "" {
			classRef["namespace"] = t.ClassNamespace
		}
		topo := map[string]any{"classRef": classRef, "version": k8sVersion}
		if t.ControlPlane != nil && t.ControlPlane.Replicas != nil {
			topo["controlPlane"] = map[string]any{"replicas": replicas(t.ControlPlane.Replicas, 1)}
		}
		if len(t.Workers) > 0 {
			mds := make([]any, 0, len(t.Workers))
			for _, md := range t.Workers {
				mds = append(mds, map[string]any{"class": md.Class, "name": md.Name, "replicas": replicas(md.Replicas, 1)})
			}
			topo["workers"] = map[string]any{"machineDeployments": mds}
		}
		if len(t.Variables) > 0 {
			vars := make([]any, 0, len(t.Variables))
			for _, v := range t.Variables {
				var value any
				if err := json.Unmarshal(v.Value, &value); err != nil {
					return nil, fmt.Errorf("spec.backend.capi.topology.variables: %s: %v", v.Name, err)
				}
				vars = append(vars, map[string]any{"name": v.Name, "value": value})
			}
			topo["variables"] = vars
		}
		spec["topology"] = topo
	} else {
		group, _, _ := strings.Cut(o.InfrastructureAPIVersion, "/")
		spec["infrastructureRef"] = map[string]any{"apiGroup": group, "kind": o.InfrastructureKind, "name": id}
		spec["controlPlaneRef"] = map[string]any{"apiGroup": controlPlaneGroup, "kind": controlPlaneKind, "name": controlPlaneName(id)}
	}
	c.Object["spec"] = spec
	return c, nil
}

// renderInfrastructure is the pass-through infrastructure object: infrastructureSpec as is.
func renderInfrastructure(id, pool string, o Options) (*unstructured.Unstructured, error) {
	obj := newObject(o.InfrastructureAPIVersion, o.InfrastructureKind, o.Namespace, id, labels(id, pool))
	spec := map[string]any{}
	if len(o.InfrastructureSpec) > 0 {
		if err := json.Unmarshal(o.InfrastructureSpec, &spec); err != nil {
			return nil, fmt.Errorf("spec.backend.capi.infrastructureSpec: %v", err)
		}
	}
	obj.Object["spec"] = spec
	return obj, nil
}

// renderMachineTemplate is the control plane's machine template (pass-through form).
func renderMachineTemplate(id, pool string, o Options) (*unstructured.Unstructured, error) {
	obj := newObject(o.InfrastructureAPIVersion, o.ControlPlane.MachineTemplateKind, o.Namespace, controlPlaneName(id), labels(id, pool))
	spec := map[string]any{}
	if err := json.Unmarshal(o.ControlPlane.MachineTemplateSpec, &spec); err != nil {
		return nil, fmt.Errorf("spec.backend.capi.controlPlane.machineTemplateSpec: %v", err)
	}
	obj.Object["spec"] = spec
	return obj, nil
}

// renderControlPlane is the KubeadmControlPlane of the pass-through form.
func renderControlPlane(id, pool, k8sVersion string, o Options) *unstructured.Unstructured {
	group, _, _ := strings.Cut(o.InfrastructureAPIVersion, "/")
	obj := newObject(controlPlaneGroup+"/v1beta2", controlPlaneKind, o.Namespace, controlPlaneName(id), labels(id, pool))
	obj.Object["spec"] = map[string]any{
		"replicas": replicas(o.ControlPlane.Replicas, 1),
		"version":  k8sVersion,
		"machineTemplate": map[string]any{"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": group, "kind": o.ControlPlane.MachineTemplateKind, "name": controlPlaneName(id)},
		}},
		"kubeadmConfigSpec": map[string]any{
			"clusterConfiguration": map[string]any{"apiServer": map[string]any{"certSANs": []any{"localhost", "127.0.0.1"}}},
		},
	}
	return obj
}

// ownedBy makes the Cluster the controller-less owner of obj: when the Cluster goes, the
// garbage collector removes what kobe created beside it, even what CAPI does not delete itself.
func ownedBy(obj, cluster *unstructured.Unstructured) {
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: cluster.GetAPIVersion(),
		Kind:       cluster.GetKind(),
		Name:       cluster.GetName(),
		UID:        cluster.GetUID(),
	}})
}
