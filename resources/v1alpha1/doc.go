// Package v1alpha1 holds kobe's Kubernetes resources, group kobe.kunobi.ninja, version
// v1alpha1: ClusterPool (a pool, in upstream's manifest shape plus kobe's additions) and
// AccessPolicy (who may lease what). Their CustomResourceDefinitions in deploy/crds/ are
// generated from these types by controller-gen (`make generate`); the markers on the types
// are the schema's validation, including the CEL rules (x-kubernetes-validations) through
// which the API server itself refuses most of what kobe's own validation (package poolspec)
// refuses. docs/gitops.md lists which rules the API server checks and which only kobe can.
//
// The path is resources/, not the kubebuilder habit api/: package api is kobe's REST wire
// types and client, standard library only, and these are the Kubernetes resources kobe serves.
//
// +kubebuilder:object:generate=true
// +groupName=kobe.kunobi.ninja
package v1alpha1
