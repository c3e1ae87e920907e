// Package poolspec holds the ClusterPool manifest (the upstream shape, apiVersion
// kobe.kunobi.ninja/v1alpha1) and its validation, shared by the API, the CLI and the workflows
// so that a pool is judged the same way everywhere.
package poolspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
)

// APIVersion and Kind of a pool manifest.
const (
	APIVersion = "kobe.kunobi.ninja/v1alpha1"
	Kind       = "ClusterPool"
)

// DefaultBackend is spec.backend.type when the manifest gives none: upstream's default.
const DefaultBackend = "k3s"

// ClusterPool is a pool manifest.
type ClusterPool struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   Metadata        `json:"metadata"`
	Spec       Spec            `json:"spec"`
	Status     json.RawMessage `json:"status,omitempty"` // accepted (exported manifests carry it), ignored
}

// Metadata of a pool.
type Metadata struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Duration is a Go duration string ("5m", "2h"); Validate parses it and names the field.
type Duration string

// Spec is the desired state of a pool.
type Spec struct {
	// Size is the fixed warm target (default 3). As upstream, it is not used when Scaling is
	// set (the warm target is then Scaling.MinReady); it is still checked.
	Size *int `json:"size,omitempty"`
	// TTL is the default lease TTL (default 2h); MaxTTL the ceiling from bind time (default
	// 24h, or TTL when that is longer: upstream has no maxTtl, and its ttl: 48h means 48h).
	TTL    Duration `json:"ttl,omitempty"`
	MaxTTL Duration `json:"maxTtl,omitempty"`
	// MaxExtensions is the extension budget of a lease (default 2).
	MaxExtensions *int `json:"maxExtensions,omitempty"`
	// MaxConcurrentProvisions bounds creations in flight (default 2).
	MaxConcurrentProvisions *int `json:"maxConcurrentProvisions,omitempty"`

	Backend        Backend         `json:"backend"`
	Cluster        Cluster         `json:"cluster"`
	Addons         []Addon         `json:"addons,omitempty"`
	Resources      *Resources      `json:"resources,omitempty"` // upstream field, refused: not acted on yet
	HealthCheck    *HealthCheck    `json:"healthCheck,omitempty"`
	ReadinessGates []ReadinessGate `json:"readinessGates,omitempty"`
	Scaling        *Scaling        `json:"scaling,omitempty"`
	UpgradePolicy  *UpgradePolicy  `json:"upgradePolicy,omitempty"`
	Certificates   *Certificates   `json:"certificates,omitempty"`
	Sleep          *Sleep          `json:"sleep,omitempty"`
	Diagnostics    json.RawMessage `json:"diagnostics,omitempty"` // upstream field, refused: not acted on yet
	Snapshot       json.RawMessage `json:"snapshot,omitempty"`    // upstream field, refused: not acted on yet
}

// Backend selects the runtime backend and carries the backends' sections. Its wire shape is
// upstream's: spec.backend.type, then spec.backend.<name> for the section of the backend <name>
// (e.g. spec.backend.local), beside the shared spec.backend.datastore and kobe's hostCluster.
type Backend struct {
	Type string `json:"type,omitempty"`
	// HostCluster (kobe addition) names the host cluster the members run in, for the backends
	// that run in one (backends.Traits.HostCluster): the workers started with
	// --host-cluster-name of that name serve them. Empty: any worker running the backend.
	HostCluster string `json:"hostCluster,omitempty"`
	// Datastore is upstream's shared datastore, read by the backends whose traits say so
	// (backends.Traits.Datastore); refused for the others.
	Datastore json.RawMessage `json:"datastore,omitempty"`
	// Sections holds every other key of spec.backend, by name: the section of the backend of
	// that name, which that backend reads (backends.Factory.Options). Validate refuses the
	// section of a backend not compiled in, or of another backend than Type's.
	Sections map[string]json.RawMessage `json:"-"`
}

// backendShared is Backend's fields other than its sections: the keys of spec.backend that are
// no backend's name.
type backendShared struct {
	Type        string          `json:"type,omitempty"`
	HostCluster string          `json:"hostCluster,omitempty"`
	Datastore   json.RawMessage `json:"datastore,omitempty"`
}

// UnmarshalJSON reads spec.backend: the shared keys into their fields, every other key into
// Sections (Parse has checked the shared keys' names; the sections are judged by Validate).
func (b *Backend) UnmarshalJSON(data []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Type = reflect.TypeOf(Backend{}) // the error names the manifest's type, not this function's map
		}
		return err
	}
	var shared backendShared
	if err := json.Unmarshal(data, &shared); err != nil {
		return err
	}
	*b = Backend{Type: shared.Type, HostCluster: shared.HostCluster, Datastore: shared.Datastore}
	for name, raw := range keys {
		if backendSharedKeys[name] {
			continue
		}
		if b.Sections == nil {
			b.Sections = map[string]json.RawMessage{}
		}
		b.Sections[name] = raw
	}
	return nil
}

// MarshalJSON writes spec.backend in its wire shape: the shared keys, then the sections.
func (b Backend) MarshalJSON() ([]byte, error) {
	out, err := json.Marshal(backendShared{Type: b.Type, HostCluster: b.HostCluster, Datastore: b.Datastore})
	if err != nil || len(b.Sections) == 0 {
		return out, err
	}
	sections, err := json.Marshal(b.Sections) // sorted by name
	if err != nil {
		return nil, err
	}
	if string(out) == "{}" {
		return sections, nil
	}
	// Both are JSON objects: the shared keys' object without its '}', then the sections' without their '{'.
	return append(append(out[:len(out)-1], ','), sections[1:]...), nil
}

// backendSharedKeys are the keys of spec.backend that name no backend's section.
var backendSharedKeys = jsonKeys(reflect.TypeOf(backendShared{}))

func jsonKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		if name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]; name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// Cluster describes the Kubernetes cluster of every member. Only Version is acted on; the other
// upstream fields parse, and Validate refuses them.
type Cluster struct {
	Version     string          `json:"version,omitempty"`
	Servers     *int            `json:"servers,omitempty"`
	Agents      *int            `json:"agents,omitempty"`
	ServerArgs  []string        `json:"serverArgs,omitempty"`
	Persistence json.RawMessage `json:"persistence,omitempty"`
	Expose      json.RawMessage `json:"expose,omitempty"`
}

// Addon is a manifest applied to every member before it is Ready.
type Addon struct {
	Name     string `json:"name"`
	Manifest string `json:"manifest,omitempty"`
	URL      string `json:"url,omitempty"`
}

// Resources of a member (backends that run in a host cluster).
type Resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// HealthCheck of Ready members; a failing member is recycled.
type HealthCheck struct {
	IntervalSeconds  int `json:"intervalSeconds,omitempty"`
	FailureThreshold int `json:"failureThreshold,omitempty"`
}

// ReadinessGate is a type-tagged check every new member must pass before it is Ready.
type ReadinessGate struct {
	Type           string `json:"type"`
	Name           string `json:"name,omitempty"`
	Namespace      string `json:"namespace,omitempty"`
	Count          int    `json:"count,omitempty"`
	URL            string `json:"url,omitempty"`
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// MinRemaining (X509Valid) is how long the member's certificates must still be valid.
	MinRemaining Duration `json:"minRemaining,omitempty"`
}

// Scaling replaces Size with an autoscaled warm pool.
type Scaling struct {
	MinReady        *int     `json:"minReady,omitempty"`
	MaxClusters     *int     `json:"maxClusters,omitempty"`
	ScaleDownAfter  Duration `json:"scaleDownAfter,omitempty"`
	QueueTimeout    Duration `json:"queueTimeout,omitempty"`
	CreatingTimeout Duration `json:"creatingTimeout,omitempty"`
	// ResumeTimeout bounds a wake from sleep (resume and ready); default 5m.
	ResumeTimeout  Duration        `json:"resumeTimeout,omitempty"`
	FailureBackoff *FailureBackoff `json:"failureBackoff,omitempty"`
	// ThawedSpares is how many Ready members the pool keeps running; the spares beyond them
	// are frozen where the backend can (backends.Freezer) and thawed as claims take the
	// running ones (default DefaultThawedSpares). A kobe field, not upstream's.
	ThawedSpares *int `json:"thawedSpares,omitempty"`
	// Schedule (kobe addition): windows of time with another warm target (poolspec/schedule.go).
	Schedule []WarmWindow `json:"schedule,omitempty"`
}

// FailureBackoff spaces provisioning retries after consecutive failures.
type FailureBackoff struct {
	Base       Duration `json:"base,omitempty"`
	Multiplier *float64 `json:"multiplier,omitempty"`
	Max        Duration `json:"max,omitempty"`
}

// UpgradePolicy bounds drift recycling.
type UpgradePolicy struct {
	MaxRecycling          *int `json:"maxRecycling,omitempty"`
	MaxSurge              *int `json:"maxSurge,omitempty"`
	MinReadyDuringUpgrade *int `json:"minReadyDuringUpgrade,omitempty"`
}

// Certificates (kobe addition) is what kobe does about the members' certificates: how long
// the serving and admin certificates of a new member live, and how long before they expire a
// warm member is recycled, or a leased one re-issued in place (the certificate workflow).
type Certificates struct {
	// Validity of a member's serving and admin certificates (default: the backend's; local:
	// 365d). Short ones are for tests and very short-lived clusters.
	Validity Duration `json:"validity,omitempty"`
	// RecycleBefore (default 30d): a warm member whose certificates expire within it is
	// recycled, a leased one gets new certificates.
	RecycleBefore Duration `json:"recycleBefore,omitempty"`
}

// Defaults and bounds of spec.certificates.
const (
	DefaultRecycleBefore   = 30 * 24 * time.Hour
	MinCertificateValidity = time.Minute
	MaxCertificateValidity = 10 * 365 * 24 * time.Hour
)

// Gate types kobe checks.
var gateTypes = map[string][]string{ // type → required fields
	"CRDExists":       {"name"},
	"NodesReady":      {"count"},
	"DeploymentReady": {"name", "namespace"},
	"DaemonSetReady":  {"name", "namespace"},
	"URLHealthy":      {"url"},
	"SchedulingProbe": {"namespace"},
	"DNSHealthy":      {"namespace"},
	"InClusterToken":  {"namespace", "serviceAccount"},
	"X509Valid":       {"minRemaining"},
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Parse reads a manifest (YAML or JSON) strictly: unknown fields are errors naming their path.
func Parse(data []byte) (*ClusterPool, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("manifest is not valid YAML: %v", err)
	}
	var raw any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("manifest: %v", err)
	}
	if _, ok := raw.(map[string]any); !ok {
		return nil, errors.New("manifest: expected a ClusterPool object")
	}
	if err := checkFields(raw, reflect.TypeOf(ClusterPool{}), ""); err != nil {
		return nil, err
	}
	var p ClusterPool
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: expected %s, got %s", te.Field, te.Type, te.Value)
		}
		return nil, fmt.Errorf("manifest: %v", err)
	}
	return &p, nil
}

// checkFields walks decoded JSON against a struct type and reports the first unknown key with
// its full path (json's own error names the key but not where it is).
func checkFields(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil // a type mismatch; the decoder reports it
		}
		fields := map[string]reflect.StructField{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name != "" && name != "-" {
				fields[name] = f
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f, ok := fields[k]
			p := join(path, k)
			if !ok && t == reflect.TypeOf(Backend{}) {
				continue // a backend's section (spec.backend.<name>): Validate judges it
			}
			if !ok {
				return fmt.Errorf("%s: unknown field", p)
			}
			if f.Type == reflect.TypeOf(json.RawMessage{}) {
				continue // checked by whoever owns that section (e.g. the backend)
			}
			if err := checkFields(m[k], f.Type, p); err != nil {
				return err
			}
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, item := range items {
			if err := checkFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Policy is a pool's resolved settings: defaults applied, durations parsed.
type Policy struct {
	Name                    string
	Backend                 string
	KubernetesVersion       string
	Autoscale               bool
	WarmTarget              int // size, or scaling.minReady
	MaxClusters             int // warm + leased + creating
	TTL                     time.Duration
	MaxTTL                  time.Duration
	MaxExtensions           int
	MaxConcurrentProvisions int
	ScaleDownAfter          time.Duration
	QueueTimeout            time.Duration
	CreatingTimeout         time.Duration
	// ResumeTimeout is spec.scaling.resumeTimeout: a wake from sleep past it breaks the instance.
	// Zero in policies written before it: instance.DefaultResumeTimeout.
	ResumeTimeout     time.Duration `json:",omitempty"`
	BackoffBase       time.Duration
	BackoffMultiplier float64
	BackoffMax        time.Duration
	Gates             []ReadinessGate
	Addons            []Addon
	BackendOptions    json.RawMessage
	// HostCluster is spec.backend.hostCluster: the members' activities run on the workers of
	// that host cluster only ("": any worker running the backend).
	HostCluster string `json:",omitempty"`
	// Drift recycling (spec.upgradePolicy): at most MaxRecycling outdated members torn down at
	// a time (0 pauses drift recycling), while at least MinReadyDuringUpgrade members stay Ready.
	MaxRecycling          int
	MaxSurge              int
	MinReadyDuringUpgrade int
	// Health of Ready and Leased members (spec.healthCheck): checked every HealthCheckInterval;
	// HealthFailureThreshold failures in a row recycle a Ready member. Zero in policies written
	// before health checks existed: the pool then uses the defaults.
	HealthCheckInterval    time.Duration
	HealthFailureThreshold int
	// Certificates (spec.certificates): the validity of new members' serving and admin
	// certificates (0: the backend's default), and how long before their expiry a warm member
	// is recycled or a leased one re-issued. RecycleBefore is zero in policies written before
	// it existed: the pool then uses DefaultRecycleBefore.
	CertificateValidity time.Duration `json:",omitempty"`
	RecycleBefore       time.Duration `json:",omitempty"`
	// FreezesSpares is set by Validate: spare Ready members beyond ThawedSpares are frozen.
	// Policies resolved before spares were frozen have it false and freeze nothing.
	FreezesSpares bool `json:",omitempty"`
	ThawedSpares  int  `json:",omitempty"`
	// Sleep is spec.sleep resolved (nil: the pool sleeps nothing by itself).
	Sleep *SleepPolicy `json:",omitempty"`
	// WarmWindows is spec.scaling.schedule resolved: other warm targets at times.
	WarmWindows []WarmWindowPolicy `json:",omitempty"`
}

// DefaultThawedSpares is how many Ready members a pool keeps running unless
// spec.scaling.thawedSpares says otherwise: a claim takes one of them at once, and the pool
// thaws the next spare off the claim's path.
const DefaultThawedSpares = 2

// DefaultResumeTimeout is spec.scaling.resumeTimeout when not set.
const DefaultResumeTimeout = 5 * time.Minute

// Defaults of spec.healthCheck (upstream's).
const (
	DefaultHealthCheckInterval    = 30 * time.Second
	DefaultHealthFailureThreshold = 3
)

// DefaultMaxTTL is spec.maxTtl when not set (unless spec.ttl is longer: then spec.ttl).
const DefaultMaxTTL = 24 * time.Hour

// Limits that keep a typo from asking for something absurd.
const (
	MaxPoolSize = 1000
	MaxTTL      = 30 * 24 * time.Hour
)

// Validate checks a parsed manifest and returns its resolved Policy. Errors name the field.
// The backend's own section (e.g. spec.backend.local) is made into its instances' options by
// the backend's registration (backends.Factory.Options), and judged by the backend's Validate
// at the pool apply's preflight and at provision time.
func (p *ClusterPool) Validate() (Policy, error) { return p.validate(true) }

// ValidateStored is Validate for a spec the store already holds: a field that this version
// refuses at apply (an earlier one accepted it, and ignored it) does not stop the pool's
// leases; the next apply of that pool names it.
func (p *ClusterPool) ValidateStored() (Policy, error) { return p.validate(false) }

// ParseStored is the policy of a spec the store holds (Parse, then ValidateStored).
func ParseStored(spec []byte) (Policy, error) {
	m, err := Parse(spec)
	if err != nil {
		return Policy{}, fmt.Errorf("stored spec: %w", err)
	}
	return m.ValidateStored()
}

func (p *ClusterPool) validate(refuse bool) (Policy, error) {
	var pol Policy
	if p.APIVersion != APIVersion {
		return pol, fmt.Errorf("apiVersion: must be %s, got %q", APIVersion, p.APIVersion)
	}
	if p.Kind != Kind {
		return pol, fmt.Errorf("kind: must be %s, got %q", Kind, p.Kind)
	}
	if !nameRE.MatchString(p.Metadata.Name) || len(p.Metadata.Name) > 40 {
		return pol, fmt.Errorf("metadata.name: %q must be a DNS label of at most 40 characters", p.Metadata.Name)
	}
	s := p.Spec
	pol.Name = p.Metadata.Name
	pol.Backend = s.Backend.Type
	if pol.Backend == "" {
		pol.Backend = DefaultBackend
	}
	backend, err := backends.Resolve(pol.Backend)
	if err != nil {
		return pol, err
	}
	if pol.BackendOptions, err = backendOptions(s, backend, refuse); err != nil {
		return pol, err
	}
	if h := s.Backend.HostCluster; h != "" {
		if !nameRE.MatchString(h) || len(h) > 63 {
			return pol, fmt.Errorf("spec.backend.hostCluster: %q is not a host cluster name (a DNS label, as given to --host-cluster-name)", h)
		}
		if !backend.Traits.HostCluster {
			return pol, fmt.Errorf("spec.backend.hostCluster: the %s backend does not run in a host cluster (%s do)",
				pol.Backend, sayList(backends.NamesWith(func(t backends.Traits) bool { return t.HostCluster })))
		}
		pol.HostCluster = h
	}
	pol.KubernetesVersion = s.Cluster.Version
	if pol.KubernetesVersion == "" {
		return pol, errors.New("spec.cluster.version: required")
	}
	if refuse {
		if err := refuseUnsupported(s, backend.Traits.Hosted); err != nil {
			return pol, err
		}
	}

	durations := []struct {
		field string
		value Duration
		def   time.Duration
		out   *time.Duration
	}{
		{"spec.ttl", s.TTL, 2 * time.Hour, &pol.TTL},
		{"spec.maxTtl", s.MaxTTL, DefaultMaxTTL, &pol.MaxTTL},
	}
	sc := s.Scaling
	if sc == nil {
		sc = &Scaling{}
	}
	fb := sc.FailureBackoff
	if fb == nil {
		fb = &FailureBackoff{}
	}
	durations = append(durations, []struct {
		field string
		value Duration
		def   time.Duration
		out   *time.Duration
	}{
		{"spec.scaling.scaleDownAfter", sc.ScaleDownAfter, 5 * time.Minute, &pol.ScaleDownAfter},
		{"spec.scaling.queueTimeout", sc.QueueTimeout, 5 * time.Minute, &pol.QueueTimeout},
		{"spec.scaling.creatingTimeout", sc.CreatingTimeout, 10 * time.Minute, &pol.CreatingTimeout},
		{"spec.scaling.resumeTimeout", sc.ResumeTimeout, DefaultResumeTimeout, &pol.ResumeTimeout},
		{"spec.scaling.failureBackoff.base", fb.Base, 5 * time.Second, &pol.BackoffBase},
		{"spec.scaling.failureBackoff.max", fb.Max, 2 * time.Minute, &pol.BackoffMax},
	}...)
	for _, d := range durations {
		if *d.out, err = parseDuration(d.field, d.value, d.def); err != nil {
			return pol, err
		}
	}
	if refuse && pol.TTL < api.MinLeaseTTL {
		// The pool's ttl is what a lease asking for none gets: the same floor as a lease's own.
		return pol, fmt.Errorf("spec.ttl: %s is shorter than the minimum lease ttl of %s", pol.TTL, api.MinLeaseTTL)
	}
	if s.MaxTTL == "" && pol.TTL > pol.MaxTTL {
		// Upstream has no maxTtl: a manifest whose ttl is longer than the default ceiling
		// means leases of that ttl, so the ceiling is the ttl (extensions cannot go past it).
		pol.MaxTTL = pol.TTL
	}
	if pol.TTL > MaxTTL || pol.MaxTTL > MaxTTL {
		return pol, fmt.Errorf("spec.ttl/spec.maxTtl: at most %s", MaxTTL)
	}
	if pol.TTL > pol.MaxTTL {
		return pol, fmt.Errorf("spec.ttl: %s is longer than spec.maxTtl %s", pol.TTL, pol.MaxTTL)
	}
	if pol.BackoffBase > pol.BackoffMax {
		return pol, fmt.Errorf("spec.scaling.failureBackoff.base: %s is longer than max %s", pol.BackoffBase, pol.BackoffMax)
	}
	pol.BackoffMultiplier = 2
	if fb.Multiplier != nil {
		if *fb.Multiplier < 1 || *fb.Multiplier > 10 {
			return pol, fmt.Errorf("spec.scaling.failureBackoff.multiplier: %v must be between 1 and 10", *fb.Multiplier)
		}
		pol.BackoffMultiplier = *fb.Multiplier
	}

	intField := func(field string, v *int, def, lo, hi int) (int, error) {
		if v == nil {
			return def, nil
		}
		if *v < lo || *v > hi {
			return 0, fmt.Errorf("%s: %d must be between %d and %d", field, *v, lo, hi)
		}
		return *v, nil
	}
	if pol.MaxExtensions, err = intField("spec.maxExtensions", s.MaxExtensions, 2, 0, 100); err != nil {
		return pol, err
	}
	if pol.MaxConcurrentProvisions, err = intField("spec.maxConcurrentProvisions", s.MaxConcurrentProvisions, 2, 1, 100); err != nil {
		return pol, err
	}
	if s.Scaling != nil {
		// spec.size is not used with spec.scaling (upstream ignores it too); a value no pool
		// could have is still refused, by name.
		if _, err := intField("spec.size", s.Size, 0, 0, MaxPoolSize); err != nil {
			return pol, err
		}
		pol.Autoscale = true
		if pol.WarmTarget, err = intField("spec.scaling.minReady", sc.MinReady, 1, 0, MaxPoolSize); err != nil {
			return pol, err
		}
		if pol.MaxClusters, err = intField("spec.scaling.maxClusters", sc.MaxClusters, 8, 1, MaxPoolSize); err != nil {
			return pol, err
		}
		if pol.WarmTarget > pol.MaxClusters {
			return pol, fmt.Errorf("spec.scaling.minReady: %d is more than maxClusters %d", pol.WarmTarget, pol.MaxClusters)
		}
		if pol.ThawedSpares, err = intField("spec.scaling.thawedSpares", sc.ThawedSpares, DefaultThawedSpares, 0, MaxPoolSize); err != nil {
			return pol, err
		}
		if err := pol.warmWindows(sc.Schedule); err != nil {
			return pol, err
		}
	} else {
		if pol.WarmTarget, err = intField("spec.size", s.Size, 3, 0, MaxPoolSize); err != nil {
			return pol, err
		}
		// A fixed pool never holds more than its size in warm members plus as many leased ones.
		pol.MaxClusters = max(2*pol.WarmTarget, 1)
		pol.ThawedSpares = DefaultThawedSpares
	}
	// Every pool freezes its spares beyond ThawedSpares (where the backend can). It was opt-in
	// while a run that continued as new dropped the signals delivered as it waited for its
	// freezes (fixed by pool-settle-before-continuing).
	pol.FreezesSpares = true

	for i, g := range s.ReadinessGates {
		field := fmt.Sprintf("spec.readinessGates[%d]", i)
		required, ok := gateTypes[g.Type]
		if !ok {
			known := make([]string, 0, len(gateTypes))
			for k := range gateTypes {
				known = append(known, k)
			}
			sort.Strings(known)
			return pol, fmt.Errorf("%s.type: unknown gate %q (known: %s)", field, g.Type, strings.Join(known, ", "))
		}
		for _, r := range required {
			missing := (r == "name" && g.Name == "") || (r == "namespace" && g.Namespace == "") ||
				(r == "url" && g.URL == "") || (r == "serviceAccount" && g.ServiceAccount == "") || (r == "count" && g.Count <= 0) ||
				(r == "minRemaining" && g.MinRemaining == "")
			if missing {
				return pol, fmt.Errorf("%s.%s: required for a %s gate", field, r, g.Type)
			}
		}
		// A field the gate's type does not read would be silently ignored.
		for _, f := range []struct {
			name string
			set  bool
		}{{"name", g.Name != ""}, {"namespace", g.Namespace != ""}, {"count", g.Count != 0}, {"url", g.URL != ""}, {"serviceAccount", g.ServiceAccount != ""},
			{"minRemaining", g.MinRemaining != ""}} {
			if refuse && f.set && !slices.Contains(required, f.name) {
				return pol, fmt.Errorf("%s.%s: not used by a %s gate", field, f.name, g.Type)
			}
		}
		if g.MinRemaining != "" {
			if d, err := ParseDays(field+".minRemaining", g.MinRemaining); err != nil {
				return pol, err
			} else if d <= 0 {
				return pol, fmt.Errorf("%s.minRemaining: must be positive", field)
			}
		}
	}
	pol.Gates = s.ReadinessGates
	up := s.UpgradePolicy
	if up == nil {
		up = &UpgradePolicy{}
	}
	if pol.MaxRecycling, err = intField("spec.upgradePolicy.maxRecycling", up.MaxRecycling, 1, 0, MaxPoolSize); err != nil {
		return pol, err
	}
	if pol.MaxSurge, err = intField("spec.upgradePolicy.maxSurge", up.MaxSurge, 1, 0, MaxPoolSize); err != nil {
		return pol, err
	}
	// By default an upgrade keeps the whole warm target Ready: replacements come first.
	if pol.MinReadyDuringUpgrade, err = intField("spec.upgradePolicy.minReadyDuringUpgrade", up.MinReadyDuringUpgrade, pol.WarmTarget, 0, MaxPoolSize); err != nil {
		return pol, err
	}
	if pol.MinReadyDuringUpgrade > pol.WarmTarget {
		return pol, fmt.Errorf("spec.upgradePolicy.minReadyDuringUpgrade: %d is more than the warm target %d", pol.MinReadyDuringUpgrade, pol.WarmTarget)
	}
	hc := s.HealthCheck
	if hc == nil {
		hc = &HealthCheck{}
	}
	// 0 means "the default", as upstream's omitted field does.
	interval, err := intField("spec.healthCheck.intervalSeconds", &hc.IntervalSeconds, 0, 0, 3600)
	if err != nil {
		return pol, err
	}
	pol.HealthCheckInterval = DefaultHealthCheckInterval
	if interval > 0 {
		pol.HealthCheckInterval = time.Duration(interval) * time.Second
	}
	if pol.HealthFailureThreshold, err = intField("spec.healthCheck.failureThreshold", &hc.FailureThreshold, 0, 0, 100); err != nil {
		return pol, err
	}
	if pol.HealthFailureThreshold == 0 {
		pol.HealthFailureThreshold = DefaultHealthFailureThreshold
	}
	names := map[string]bool{}
	for i, a := range s.Addons {
		field := fmt.Sprintf("spec.addons[%d]", i)
		if a.Name == "" {
			return pol, fmt.Errorf("%s.name: required", field)
		}
		if names[a.Name] {
			return pol, fmt.Errorf("%s.name: %q is used twice", field, a.Name)
		}
		names[a.Name] = true
		if (a.Manifest == "") == (a.URL == "") {
			return pol, fmt.Errorf("%s: give exactly one of manifest or url", field)
		}
	}
	pol.Addons = s.Addons
	if err := pol.certificates(s.Certificates, refuse); err != nil {
		return pol, err
	}
	if err := pol.sleep(s.Sleep, refuse); err != nil {
		return pol, err
	}
	return pol, nil
}

// certificates resolves spec.certificates. Its fields are acted on only for backends that
// know their members' certificates (backends.CertManager): for the others they are refused.
func (pol *Policy) certificates(c *Certificates, refuse bool) error {
	pol.RecycleBefore = DefaultRecycleBefore
	if c == nil {
		return nil
	}
	if f, _ := backends.Resolve(pol.Backend); refuse && f.Prototype != nil {
		if _, ok := f.Prototype.(backends.CertManager); !ok {
			return fmt.Errorf("spec.certificates is not supported by the %s backend (it cannot report or re-issue its members' certificates)", pol.Backend)
		}
	}
	var err error
	if c.Validity != "" {
		if pol.CertificateValidity, err = ParseDays("spec.certificates.validity", c.Validity); err != nil {
			return err
		}
		if pol.CertificateValidity < MinCertificateValidity || pol.CertificateValidity > MaxCertificateValidity {
			return fmt.Errorf("spec.certificates.validity: %s must be between %s and %s", pol.CertificateValidity, MinCertificateValidity, MaxCertificateValidity)
		}
	}
	if c.RecycleBefore != "" {
		if pol.RecycleBefore, err = ParseDays("spec.certificates.recycleBefore", c.RecycleBefore); err != nil {
			return err
		}
		if pol.RecycleBefore <= 0 {
			return errors.New("spec.certificates.recycleBefore: must be positive")
		}
	} else if pol.CertificateValidity > 0 && pol.CertificateValidity <= DefaultRecycleBefore {
		// A short validity with the default recycleBefore would recycle every member at once.
		return fmt.Errorf("spec.certificates.recycleBefore: required when validity (%s) is not longer than the default %s", pol.CertificateValidity, DefaultRecycleBefore)
	}
	if pol.CertificateValidity > 0 && pol.RecycleBefore >= pol.CertificateValidity {
		return fmt.Errorf("spec.certificates.recycleBefore: %s must be shorter than validity %s (every member would be recycled as soon as it is made)", pol.RecycleBefore, pol.CertificateValidity)
	}
	return nil
}

// ParseDays is parseDuration that also takes whole days ("30d"), the unit certificates are
// usually spoken of in. Empty is an error: the caller handles the default.
func ParseDays(field string, v Duration) (time.Duration, error) {
	s := string(v)
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100*365 {
			return 0, fmt.Errorf("%s: %q is not a duration (use e.g. 30d, 12h, 5m)", field, s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: %q is not a duration (use e.g. 30d, 12h, 5m)", field, s)
	}
	return d, nil
}

// refuseUnsupported refuses the fields this version parses (they are in the upstream shape)
// but does not act on: a manifest means what it says, so a field that would be ignored is an
// error naming it, until kobe implements it.
// hosted says whether the backend reads spec.cluster's shape and spec.resources itself
// (backends.Traits.Hosted: memberShape passes them on); for the others they are refused.
func refuseUnsupported(s Spec, hosted bool) error {
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"spec.resources", s.Resources != nil && !hosted},
		{"spec.diagnostics", len(s.Diagnostics) > 0},
		{"spec.snapshot", len(s.Snapshot) > 0},
		{"spec.cluster.servers", s.Cluster.Servers != nil && !hosted},
		{"spec.cluster.agents", s.Cluster.Agents != nil && !hosted},
		{"spec.cluster.serverArgs", len(s.Cluster.ServerArgs) > 0 && !hosted},
		{"spec.cluster.persistence", len(s.Cluster.Persistence) > 0 && !hosted},
		{"spec.cluster.expose", len(s.Cluster.Expose) > 0 && !hosted},
	} {
		if f.set {
			return fmt.Errorf("%s is not supported by this version of kobe", f.field)
		}
	}
	return nil
}

func parseDuration(field string, v Duration, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(string(v))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: %q is not a duration (use e.g. 30s, 5m, 2h)", field, string(v))
	}
	return d, nil
}

// backendOptions is the InstanceSpec.Options of the pool's members, made by its backend from its
// section and the shared parts of the manifest its traits say it reads. At apply (refuse), a part
// that this pool's backend does not read, and so would ignore, is an error naming it.
func backendOptions(s Spec, backend backends.Factory, refuse bool) (json.RawMessage, error) {
	if refuse {
		names := make([]string, 0, len(s.Backend.Sections))
		for name := range s.Backend.Sections {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if name == backend.Name {
				continue
			}
			if _, ok := backends.Lookup(name); !ok {
				return nil, fmt.Errorf("spec.backend.%s is not supported by this version of kobe (no backend of that name is compiled in: %s)", name, strings.Join(backends.Names(), ", "))
			}
			return nil, fmt.Errorf("spec.backend.%s is not supported by the %s backend (it is read when spec.backend.type is %s)", name, backend.Name, name)
		}
		if len(s.Backend.Datastore) > 0 && !backend.Traits.Datastore {
			return nil, fmt.Errorf("spec.backend.datastore is not supported by the %s backend (a shared datastore is read by the %s backends)",
				backend.Name, sayList(backends.NamesWith(func(t backends.Traits) bool { return t.Datastore })))
		}
	}
	sec := backends.PoolSection{Field: "spec.backend." + backend.Name, Own: s.Backend.Sections[backend.Name]}
	if backend.Traits.Datastore {
		sec.Datastore = s.Backend.Datastore
	}
	if backend.Traits.Hosted {
		sec.Cluster, sec.Resources = memberShape(s)
	}
	return backend.PoolOptions(sec)
}

// memberShape is what shapes a hosted backend's member beside its version: the fields of
// spec.cluster among servers, agents, serverArgs, persistence and expose that are set (nil when
// none is), and spec.resources (nil when absent). The JSON is canonical (sorted keys).
func memberShape(s Spec) (cluster, resources json.RawMessage) {
	c := s.Cluster
	shape := map[string]any{}
	if c.Servers != nil {
		shape["servers"] = *c.Servers
	}
	if c.Agents != nil {
		shape["agents"] = *c.Agents
	}
	if len(c.ServerArgs) > 0 {
		shape["serverArgs"] = c.ServerArgs
	}
	if len(c.Persistence) > 0 {
		shape["persistence"] = c.Persistence
	}
	if len(c.Expose) > 0 {
		shape["expose"] = c.Expose
	}
	if len(shape) > 0 {
		cluster, _ = json.Marshal(shape)
	}
	if s.Resources != nil {
		resources, _ = json.Marshal(s.Resources)
	}
	return cluster, resources
}

// sayList is names as a sentence says them: "a", "a and b", "a, b and c".
func sayList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
