package capi

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Options is spec.backend.capi of a pool, in one of two forms:
//
//   - pass-through (the upstream shape): infrastructureApiVersion, infrastructureKind,
//     infrastructureSpec (given to the provider as is) and infrastructurePlural. kobe creates the
//     Cluster, the infrastructure object and a KubeadmControlPlane on machines of the
//     provider's <Kind>MachineTemplate (controlPlane, a kobe addition, says how many and
//     which machines);
//   - topology: a ClusterClass (topology.class), its variables, control-plane replicas and
//     worker machine deployments, which is how real providers (CAPMOX, CAPK…) are used.
//
// The Kubernetes version is the pool's spec.cluster.version in both forms.
type Options struct {
	InfrastructureAPIVersion string          `json:"infrastructureApiVersion,omitempty"`
	InfrastructureKind       string          `json:"infrastructureKind,omitempty"`
	InfrastructureSpec       json.RawMessage `json:"infrastructureSpec,omitempty"`
	InfrastructurePlural     string          `json:"infrastructurePlural,omitempty"`
	ControlPlane             *ControlPlane   `json:"controlPlane,omitempty"`

	Topology *Topology `json:"topology,omitempty"`

	// Namespace of the management cluster the Cluster is created in (default "default").
	Namespace string `json:"namespace,omitempty"`
}

// ControlPlane of the pass-through form: a KubeadmControlPlane with Replicas machines of
// MachineTemplateKind (default: the infrastructure kind with "Cluster" replaced by
// "MachineTemplate", e.g. DevCluster → DevMachineTemplate), whose spec is MachineTemplateSpec
// passed through as is (default {"template":{"spec":{}}}).
type ControlPlane struct {
	Replicas            *int            `json:"replicas,omitempty"`
	MachineTemplateKind string          `json:"machineTemplateKind,omitempty"`
	MachineTemplateSpec json.RawMessage `json:"machineTemplateSpec,omitempty"`
}

// Topology is the ClusterClass form.
type Topology struct {
	Class string `json:"class"`
	// ClassNamespace defaults to the Cluster's namespace.
	ClassNamespace string     `json:"classNamespace,omitempty"`
	Variables      []Variable `json:"variables,omitempty"`
	ControlPlane   *struct {
		Replicas *int `json:"replicas,omitempty"`
	} `json:"controlPlane,omitempty"`
	Workers []MachineDeployment `json:"workers,omitempty"`
}

// Variable is one ClusterClass variable; Value is any JSON value the class's schema accepts.
type Variable struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// MachineDeployment is one worker pool of a topology.
type MachineDeployment struct {
	Class    string `json:"class"`
	Name     string `json:"name"`
	Replicas *int   `json:"replicas,omitempty"`
}

// Limits that keep a typo from asking for something absurd.
const (
	MaxControlPlaneReplicas = 7
	MaxWorkerReplicas       = 100
	MaxMachineDeployments   = 10
)

var (
	dnsLabel       = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	kindPattern    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionPattern = regexp.MustCompile(`^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]*)?$`)
)

// ParseOptions decodes spec.backend.capi strictly (unknown fields are errors) and checks what
// can be checked without the management cluster. Errors name the field.
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) == 0 || string(raw) == "null" {
		return o, errors.New("spec.backend.capi: required for the capi backend (give infrastructureKind… or topology)")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("spec.backend.capi: %v", err)
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if !dnsLabel.MatchString(o.Namespace) || len(o.Namespace) > 63 {
		return o, fmt.Errorf("spec.backend.capi.namespace: %q is not a namespace name", o.Namespace)
	}
	passThrough := o.InfrastructureAPIVersion != "" || o.InfrastructureKind != "" || len(o.InfrastructureSpec) > 0 ||
		o.InfrastructurePlural != "" || o.ControlPlane != nil
	switch {
	case passThrough && o.Topology != nil:
		return o, errors.New("spec.backend.capi: give either the pass-through fields (infrastructureApiVersion, infrastructureKind, infrastructureSpec…) or topology, not both")
	case o.Topology != nil:
		return o, o.checkTopology()
	case passThrough:
		return o, o.checkPassThrough()
	default:
		return o, errors.New("spec.backend.capi: give infrastructureApiVersion + infrastructureKind (pass-through) or topology.class (ClusterClass)")
	}
}

func (o *Options) checkPassThrough() error {
	if o.InfrastructureAPIVersion == "" {
		return errors.New("spec.backend.capi.infrastructureApiVersion: required (e.g. infrastructure.cluster.x-k8s.io/v1beta2)")
	}
	group, version, ok := strings.Cut(o.InfrastructureAPIVersion, "/")
	if !ok || group == "" || version == "" || strings.Contains(version, "/") {
		return fmt.Errorf("spec.backend.capi.infrastructureApiVersion: %q must be <group>/<version>", o.InfrastructureAPIVersion)
	}
	if !kindPattern.MatchString(o.InfrastructureKind) {
		return fmt.Errorf("spec.backend.capi.infrastructureKind: %q is not a kind (e.g. DevCluster)", o.InfrastructureKind)
	}
	if o.InfrastructurePlural != "" && (!dnsLabel.MatchString(o.InfrastructurePlural) || len(o.InfrastructurePlural) > 63) {
		return fmt.Errorf("spec.backend.capi.infrastructurePlural: %q is not a resource name", o.InfrastructurePlural)
	}
	if err := checkObject("spec.backend.capi.infrastructureSpec", o.InfrastructureSpec); err != nil {
		return err
	}
	if o.ControlPlane == nil {
		o.ControlPlane = &ControlPlane{}
	}
	cp := o.ControlPlane
	if err := checkReplicas("spec.backend.capi.controlPlane.replicas", cp.Replicas, 1, MaxControlPlaneReplicas); err != nil {
		return err
	}
	if cp.MachineTemplateKind == "" {
		base, ok := strings.CutSuffix(o.InfrastructureKind, "Cluster")
		if !ok || base == "" {
			return fmt.Errorf("spec.backend.capi.controlPlane.machineTemplateKind: required: %q does not end in Cluster, so the machine template's kind cannot be derived", o.InfrastructureKind)
		}
		cp.MachineTemplateKind = base + "MachineTemplate"
	}
	if !kindPattern.MatchString(cp.MachineTemplateKind) {
		return fmt.Errorf("spec.backend.capi.controlPlane.machineTemplateKind: %q is not a kind", cp.MachineTemplateKind)
	}
	if len(cp.MachineTemplateSpec) == 0 {
		cp.MachineTemplateSpec = json.RawMessage(`{"template":{"spec":{}}}`)
	}
	return checkObject("spec.backend.capi.controlPlane.machineTemplateSpec", cp.MachineTemplateSpec)
}

func (o *Options) checkTopology() error {
	t := o.Topology
	if !dnsLabel.MatchString(t.Class) || len(t.Class) > 253 {
		return fmt.Errorf("spec.backend.capi.topology.class: %q is not a ClusterClass name", t.Class)
	}
	if t.ClassNamespace != "" && (!dnsLabel.MatchString(t.ClassNamespace) || len(t.ClassNamespace) > 63) {
		return fmt.Errorf("spec.backend.capi.topology.classNamespace: %q is not a namespace name", t.ClassNamespace)
	}
	seen := map[string]bool{}
	for i, v := range t.Variables {
		f := fmt.Sprintf("spec.backend.capi.topology.variables[%d]", i)
		if v.Name == "" {
			return fmt.Errorf("%s.name: required", f)
		}
		if seen[v.Name] {
			return fmt.Errorf("%s.name: %q is given twice", f, v.Name)
		}
		seen[v.Name] = true
		if len(v.Value) == 0 {
			return fmt.Errorf("%s.value: required", f)
		}
		if !json.Valid(v.Value) {
			return fmt.Errorf("%s.value: not valid JSON", f)
		}
	}
	if t.ControlPlane != nil {
		if err := checkReplicas("spec.backend.capi.topology.controlPlane.replicas", t.ControlPlane.Replicas, 1, MaxControlPlaneReplicas); err != nil {
			return err
		}
	}
	if len(t.Workers) > MaxMachineDeployments {
		return fmt.Errorf("spec.backend.capi.topology.workers: at most %d machine deployments", MaxMachineDeployments)
	}
	names := map[string]bool{}
	for i, md := range t.Workers {
		f := fmt.Sprintf("spec.backend.capi.topology.workers[%d]", i)
		if !dnsLabel.MatchString(md.Class) {
			return fmt.Errorf("%s.class: %q is not a machine deployment class name", f, md.Class)
		}
		if !dnsLabel.MatchString(md.Name) || len(md.Name) > 20 {
			return fmt.Errorf("%s.name: %q must be a DNS label of at most 20 characters", f, md.Name)
		}
		if names[md.Name] {
			return fmt.Errorf("%s.name: %q is used twice", f, md.Name)
		}
		names[md.Name] = true
		if err := checkReplicas(f+".replicas", md.Replicas, 0, MaxWorkerReplicas); err != nil {
			return err
		}
	}
	return nil
}

func checkReplicas(field string, v *int, lo, hi int) error {
	if v != nil && (*v < lo || *v > hi) {
		return fmt.Errorf("%s: %d must be between %d and %d", field, *v, lo, hi)
	}
	return nil
}

func checkObject(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf("%s: must be an object", field)
	}
	return nil
}

func replicas(v *int, def int) int64 {
	if v == nil {
		return int64(def)
	}
	return int64(*v)
}
