package hosted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kunobi-ninja/kobe/backends"
)

// Options is what a pool gives a hosted backend. PoolOptions builds it from the manifest:
// the backend's own section (spec.backend.<type>: Namespace, Image) plus, under reserved keys,
// spec.cluster (minus version), spec.resources and spec.backend.datastore, so that the backend
// sees everything that shapes an instance and a change of any of it is drift.
type Options struct {
	// Namespace of the host cluster the instance's objects go in (default "default").
	Namespace string `json:"namespace,omitempty"`
	// Image overrides the server and agent image (default: the distribution's image of
	// spec.cluster.version, e.g. rancher/k3s:v1.32.0-k3s1), e.g. for a private registry mirror.
	Image string `json:"image,omitempty"`

	Cluster   Cluster         `json:"cluster,omitempty"`
	Resources *Resources      `json:"resources,omitempty"`
	Datastore json.RawMessage `json:"datastore,omitempty"`
}

// Cluster is spec.cluster of the upstream ClusterPool, without version (InstanceSpec carries it).
type Cluster struct {
	Servers     *int         `json:"servers,omitempty"`
	Agents      *int         `json:"agents,omitempty"`
	ServerArgs  []string     `json:"serverArgs,omitempty"`
	Persistence *Persistence `json:"persistence,omitempty"`
	Expose      *Expose      `json:"expose,omitempty"`
}

// Persistence of a server's data directory: an emptyDir (the default; the data goes with the
// pod) or a PersistentVolumeClaim per server (storageType pvc).
type Persistence struct {
	StorageType        string `json:"storageType,omitempty"`
	StorageClassName   string `json:"storageClassName,omitempty"`
	StorageRequestSize string `json:"storageRequestSize,omitempty"`
}

// Expose says how the instance's API is reached: its Service's type.
type Expose struct {
	ExposeType       string `json:"exposeType,omitempty"`
	IngressClassName string `json:"ingressClassName,omitempty"`
	NodePort         *int32 `json:"nodePort,omitempty"`
}

// Resources of every server and agent container.
type Resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// Storage types and expose types.
const (
	StorageEmptyDir = "emptyDir"
	StoragePVC      = "pvc"

	ExposeClusterIP    = "ClusterIP"
	ExposeNodePort     = "NodePort"
	ExposeLoadBalancer = "LoadBalancer"
)

// Limits that keep a typo from asking for something absurd.
const (
	MaxServers = 7
	MaxAgents  = 50
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Parsed is Options with defaults applied.
type Parsed struct {
	Options
	Servers, Agents int
	StorageType     string
	StorageSize     resource.Quantity
	ExposeType      string
	// SharedDatastore is spec.backend.datastore (nil: each server keeps its embedded datastore).
	SharedDatastore *DatastoreOptions
}

// ParseOptions decodes and checks the options; errors name the manifest field (section is
// the backend's, e.g. "spec.backend.k3s").
func ParseOptions(section string, raw json.RawMessage) (Parsed, error) {
	// Each part is decoded on its own, so that an error names the manifest field it came from.
	var parts struct {
		Namespace string          `json:"namespace,omitempty"`
		Image     string          `json:"image,omitempty"`
		Cluster   json.RawMessage `json:"cluster,omitempty"`
		Resources json.RawMessage `json:"resources,omitempty"`
		Datastore json.RawMessage `json:"datastore,omitempty"`
	}
	if err := strictDecode(raw, &parts); err != nil {
		return Parsed{}, fmt.Errorf("%s: %s", section, err)
	}
	o := Options{Namespace: parts.Namespace, Image: parts.Image, Datastore: parts.Datastore}
	if err := strictDecode(parts.Cluster, &o.Cluster); err != nil {
		return Parsed{}, fmt.Errorf("spec.cluster: %s", err)
	}
	if len(parts.Resources) > 0 {
		o.Resources = &Resources{}
		if err := strictDecode(parts.Resources, o.Resources); err != nil {
			return Parsed{}, fmt.Errorf("spec.resources: %s", err)
		}
	}
	p := Parsed{Options: o, Servers: 1, StorageType: StorageEmptyDir, ExposeType: ExposeClusterIP}
	if o.Namespace == "" {
		p.Namespace = "default"
	} else if !dnsLabel.MatchString(o.Namespace) || len(o.Namespace) > 63 {
		return p, fmt.Errorf("%s.namespace: %q is not a namespace name", section, o.Namespace)
	}
	if o.Image != "" && (strings.ContainsAny(o.Image, " \t\n") || !strings.Contains(o.Image, ":")) {
		return p, fmt.Errorf("%s.image: %q must be an image reference with a tag", section, o.Image)
	}
	c := o.Cluster
	if c.Servers != nil {
		if *c.Servers < 1 || *c.Servers > MaxServers {
			return p, fmt.Errorf("spec.cluster.servers: %d is not between 1 and %d", *c.Servers, MaxServers)
		}
		p.Servers = *c.Servers
	}
	if c.Agents != nil {
		if *c.Agents < 0 || *c.Agents > MaxAgents {
			return p, fmt.Errorf("spec.cluster.agents: %d is not between 0 and %d", *c.Agents, MaxAgents)
		}
		p.Agents = *c.Agents
	}
	for i, a := range c.ServerArgs {
		if !strings.HasPrefix(a, "-") || strings.ContainsAny(a, "\n\x00") {
			return p, fmt.Errorf("spec.cluster.serverArgs[%d]: %q is not a flag (each entry is one --flag or --flag=value)", i, a)
		}
	}
	ds, err := parseDatastore(o.Datastore)
	if err != nil {
		return p, err
	}
	p.SharedDatastore = ds
	if p.Servers > 1 && ds == nil {
		// Servers with embedded datastores would be separate clusters behind one Service.
		return p, fmt.Errorf("spec.cluster.servers: %d servers need a shared datastore (spec.backend.datastore): each server's embedded one would make it a cluster of its own; use servers: 1 or name a datastore", p.Servers)
	}
	if ps := c.Persistence; ps != nil {
		switch ps.StorageType {
		case "", StorageEmptyDir:
			if ps.StorageClassName != "" || ps.StorageRequestSize != "" {
				return p, errors.New("spec.cluster.persistence: storageClassName and storageRequestSize need storageType: pvc")
			}
		case StoragePVC:
			p.StorageType = StoragePVC
			size := ps.StorageRequestSize
			if size == "" {
				size = "10Gi"
			}
			q, err := resource.ParseQuantity(size)
			if err != nil || q.Sign() <= 0 {
				return p, fmt.Errorf("spec.cluster.persistence.storageRequestSize: %q is not a size such as 10Gi", ps.StorageRequestSize)
			}
			p.StorageSize = q
			if ps.StorageClassName != "" && (!dnsSubdomain.MatchString(ps.StorageClassName) || len(ps.StorageClassName) > 253) {
				return p, fmt.Errorf("spec.cluster.persistence.storageClassName: %q is not a StorageClass name", ps.StorageClassName)
			}
		default:
			return p, fmt.Errorf("spec.cluster.persistence.storageType: %q is not one of %s, %s", ps.StorageType, StorageEmptyDir, StoragePVC)
		}
	}
	if e := c.Expose; e != nil {
		switch e.ExposeType {
		case "", ExposeClusterIP:
			if e.NodePort != nil {
				return p, errors.New("spec.cluster.expose.nodePort: needs exposeType: NodePort")
			}
		case ExposeNodePort:
			p.ExposeType = ExposeNodePort
			if e.NodePort != nil && (*e.NodePort < 1 || *e.NodePort > 65535) {
				return p, fmt.Errorf("spec.cluster.expose.nodePort: %d is not a port", *e.NodePort)
			}
		case ExposeLoadBalancer:
			p.ExposeType = ExposeLoadBalancer
			if e.NodePort != nil {
				return p, errors.New("spec.cluster.expose.nodePort: needs exposeType: NodePort")
			}
		case "ingress", "Ingress":
			// An Ingress routes HTTP and terminates TLS at its controller; the instance's API
			// authenticates clients by certificate, which needs TLS passed through to the servers,
			// and the Ingress API has no field for that (each controller has its own annotation).
			return p, fmt.Errorf("spec.cluster.expose.exposeType: %s is not supported by kobe: the instance's API needs TLS passed through to its servers (client certificates), which an Ingress does not express; use NodePort or LoadBalancer", e.ExposeType)
		default:
			return p, fmt.Errorf("spec.cluster.expose.exposeType: %q is not one of ClusterIP, NodePort, LoadBalancer", e.ExposeType)
		}
		if e.IngressClassName != "" {
			return p, errors.New("spec.cluster.expose.ingressClassName: only with exposeType ingress, which kobe does not support")
		}
	}
	if r := o.Resources; r != nil {
		for field, list := range map[string]map[string]string{"spec.resources.limits": r.Limits, "spec.resources.requests": r.Requests} {
			for name, v := range list {
				if name != "cpu" && name != "memory" && name != "ephemeral-storage" {
					return p, fmt.Errorf("%s.%s: not a resource kobe sets (cpu, memory, ephemeral-storage)", field, name)
				}
				if _, err := resource.ParseQuantity(v); err != nil {
					return p, fmt.Errorf("%s.%s: %q is not a quantity", field, name, v)
				}
			}
		}
	}
	return p, nil
}

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

func strictDecode(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(fieldError(err))
	}
	return nil
}

// fieldError turns encoding/json's messages into ones that name the field as the manifest does.
func fieldError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, `unknown field "`); i >= 0 {
		field := strings.TrimSuffix(msg[i+len(`unknown field "`):], `"`)
		return fmt.Sprintf("unknown field %q", field)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: wrong type (%s, want %s)", te.Field, te.Value, te.Type)
	}
	return msg
}

// PoolOptions is the registration's Options of the hosted backends (k3s, k0s): their own section
// spec.backend.<type> (an object) plus, under the keys cluster, resources and datastore, the
// parts of the manifest that shape a member (Traits.Hosted and Datastore). The JSON is canonical
// (sorted keys), so that drift is a change of any of it.
func PoolOptions(sec backends.PoolSection) (json.RawMessage, error) {
	out, err := sec.Fields()
	if err != nil {
		return nil, err
	}
	for _, reserved := range []struct{ key, givenAs string }{
		{"cluster", "spec.cluster"}, {"resources", "spec.resources"}, {"datastore", "spec.backend.datastore"},
	} {
		if _, ok := out[reserved.key]; ok {
			return nil, fmt.Errorf("%s.%s: not a field of %s (give it as %s)", sec.Field, reserved.key, sec.Field, reserved.givenAs)
		}
	}
	for key, part := range map[string]json.RawMessage{"cluster": sec.Cluster, "resources": sec.Resources, "datastore": sec.Datastore} {
		if len(part) > 0 {
			out[key] = part
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", sec.Field, err)
	}
	return raw, nil
}
