package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// A ClusterPool's spec and a pool manifest's spec (poolspec.Spec) have the same JSON shape,
// field for field: the resource is the manifest, served by Kubernetes. So the conversion goes
// through JSON, decoded strictly on both sides: a field one side has and the other has not is
// an error naming it, never a value dropped on the way (TestSpecFieldsMatchTheManifest keeps
// the two type trees in step).

// lastAppliedAnnotation is kubectl's copy of the whole object it last applied (client-side
// apply): the client's bookkeeping, not an annotation the pool's author wrote.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Manifest is the pool manifest the resource holds, as kobe's API takes it in
// PUT /v1/pools/{name}: apiVersion and kind of a manifest, the resource's name, labels and
// annotations (but kubectl's last-applied copy), and its spec. It is parsed (poolspec.Parse),
// not validated: the caller validates it as every manifest is.
func (p *ClusterPool) Manifest() (*poolspec.ClusterPool, error) {
	spec, err := json.Marshal(p.Spec)
	if err != nil {
		return nil, fmt.Errorf("clusterpool %s: spec: %w", p.Name, err)
	}
	annotations := maps.Clone(p.Annotations)
	delete(annotations, lastAppliedAnnotation)
	if len(annotations) == 0 {
		annotations = nil
	}
	doc, err := json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   poolspec.Metadata `json:"metadata"`
		Spec       json.RawMessage   `json:"spec"`
	}{
		APIVersion: poolspec.APIVersion,
		Kind:       poolspec.Kind,
		Metadata:   poolspec.Metadata{Name: p.Name, Labels: p.Labels, Annotations: annotations},
		Spec:       spec,
	})
	if err != nil {
		return nil, fmt.Errorf("clusterpool %s: %w", p.Name, err)
	}
	m, err := poolspec.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("clusterpool %s: %w", p.Name, err)
	}
	return m, nil
}

// FromManifest is the ClusterPool resource of a pool manifest: its name, labels and
// annotations, and its spec. A manifest's status is not carried (a resource's status is
// kobe's to write). A field the resource cannot hold (a section of a backend kobe does not
// have, such as spec.backend.vkobe) is an error naming it.
func FromManifest(m *poolspec.ClusterPool) (*ClusterPool, error) {
	raw, err := json.Marshal(m.Spec)
	if err != nil {
		return nil, fmt.Errorf("pool %s: spec: %w", m.Metadata.Name, err)
	}
	var spec ClusterPoolSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("pool %s: spec: a ClusterPool resource cannot hold it: %w", m.Metadata.Name, err)
	}
	return &ClusterPool{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "ClusterPool"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Metadata.Name,
			Labels:      maps.Clone(m.Metadata.Labels),
			Annotations: maps.Clone(m.Metadata.Annotations),
		},
		Spec: spec,
	}, nil
}
