package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of kobe's resources: the apiVersion of upstream's ClusterPool manifests.
var GroupVersion = schema.GroupVersion{Group: "kobe.kunobi.ninja", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the resources' Go types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the resources' Go types to a runtime.Scheme (a client's or a controller's).
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ClusterPool{}, &ClusterPoolList{}, &AccessPolicy{}, &AccessPolicyList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
