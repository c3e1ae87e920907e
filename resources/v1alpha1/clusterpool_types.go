package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPool is a pool of warm Kubernetes clusters of one shape, leased through kobe's API.
// Its spec is a pool manifest (upstream's shape, plus kobe's additions): `kubectl apply -f`
// takes the same files as `kobe pool apply -f`. Cluster-scoped, because a pool's name is
// kobe's key for it (leases name the pool), unique across the whole kobe installation; a
// manifest that names a namespace still applies (the API server drops the namespace of a
// cluster-scoped object).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=kobe
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Leased",type=integer,JSONPath=`.status.leased`
// +kubebuilder:printcolumn:name="Creating",type=integer,JSONPath=`.status.creating`
// +kubebuilder:printcolumn:name="Quarantined",type=integer,JSONPath=`.status.quarantined`
// +kubebuilder:printcolumn:name="Failures",type=integer,JSONPath=`.status.consecutiveFailures`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: a pool's name is a DNS label of at most 40 characters"
type ClusterPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ClusterPoolSpec   `json:"spec"`
	Status ClusterPoolStatus `json:"status,omitempty"`
}

// ClusterPoolList is a list of ClusterPools.
//
// +kubebuilder:object:root=true
type ClusterPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPool `json:"items"`
}

// ClusterPoolSpec is the desired state of a pool: poolspec.Spec's fields, each with the same
// name, JSON shape and meaning (docs/pools.md); the conversion (convert.go) goes through JSON.
//
// +kubebuilder:validation:XValidation:rule="!has(self.diagnostics)",fieldPath=".diagnostics",reason="FieldValueForbidden",message="spec.diagnostics is not supported by this version of kobe"
// +kubebuilder:validation:XValidation:rule="!has(self.snapshot)",fieldPath=".snapshot",reason="FieldValueForbidden",message="spec.snapshot is not supported by this version of kobe"
// +kubebuilder:validation:XValidation:rule="!has(self.maxTtl) || !self.maxTtl.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || (has(self.ttl) ? (!self.ttl.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self.ttl) <= duration(self.maxTtl)) : duration('2h') <= duration(self.maxTtl))",fieldPath=".ttl",message="spec.ttl (default 2h) must not be longer than spec.maxTtl"
// +kubebuilder:validation:XValidation:rule="!has(self.upgradePolicy) || !has(self.upgradePolicy.minReadyDuringUpgrade) || self.upgradePolicy.minReadyDuringUpgrade <= (has(self.scaling) ? (has(self.scaling.minReady) ? self.scaling.minReady : 1) : (has(self.size) ? self.size : 3))",fieldPath=".upgradePolicy.minReadyDuringUpgrade",message="spec.upgradePolicy.minReadyDuringUpgrade must not be more than the warm target (spec.scaling.minReady, default 1, or else spec.size, default 3)"
type ClusterPoolSpec struct {
	// Size is the fixed warm target (default 3); with spec.scaling the warm target is
	// spec.scaling.minReady and size is not used.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Size *int `json:"size,omitempty"`
	// TTL is a lease's TTL when it asks for none (default 2h; at least 5s, at most 720h).
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || (duration(self) >= duration('5s') && duration(self) <= duration('720h'))",message="must be between 5s (the shortest lease) and 720h"
	// +optional
	TTL Duration `json:"ttl,omitempty"`
	// MaxTTL is the ceiling of a lease's life from bind time, extensions included (default
	// 24h, or ttl when that is longer; at most 720h). A kobe addition.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) <= duration('720h')",message="must be at most 720h"
	// +optional
	MaxTTL Duration `json:"maxTtl,omitempty"`
	// MaxExtensions is the extension budget of a lease (default 2). A kobe addition.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxExtensions *int `json:"maxExtensions,omitempty"`
	// MaxConcurrentProvisions bounds the members being created at once (default 2). A kobe addition.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxConcurrentProvisions *int `json:"maxConcurrentProvisions,omitempty"`

	// Backend is the runtime backend of the members and its settings.
	// +required
	Backend Backend `json:"backend"`
	// Cluster is the Kubernetes cluster every member is.
	// +required
	Cluster Cluster `json:"cluster"`
	// Addons are manifests applied to every member before it is Ready, in this order.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Addons []Addon `json:"addons,omitempty"`
	// Resources of a member's pods, for the backends whose members are pods of a host cluster.
	// +optional
	Resources *Resources `json:"resources,omitempty"`
	// HealthCheck of Ready and leased members; a Ready member failing it is recycled.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// ReadinessGates are checks every new member passes before it is Ready.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	ReadinessGates []ReadinessGate `json:"readinessGates,omitempty"`
	// Scaling makes the pool autoscaled (replaces size).
	// +optional
	Scaling *Scaling `json:"scaling,omitempty"`
	// UpgradePolicy bounds the recycling of members whose spec is outdated.
	// +optional
	UpgradePolicy *UpgradePolicy `json:"upgradePolicy,omitempty"`
	// Certificates is what kobe does about the members' certificates. A kobe addition.
	// +optional
	Certificates *Certificates `json:"certificates,omitempty"`
	// Sleep puts leased clusters to sleep without anyone asking. A kobe addition.
	// +optional
	Sleep *Sleep `json:"sleep,omitempty"`
	// Diagnostics is upstream's; this version of kobe refuses it.
	// +optional
	Diagnostics *Diagnostics `json:"diagnostics,omitempty"`
	// Snapshot is upstream's; this version of kobe refuses it.
	// +optional
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// Backend selects the runtime backend and carries its section, spec.backend.<type>. A section
// belongs to its backend, which reads and judges it when the pool is applied (the API server
// keeps it as given): it is typed here only as an object, or null (absent, as kobe reads it). A
// section of another backend than the pool's is refused. The backends named here are the ones kobe compiles in (a test keeps
// the list in step with the registry).
//
// +kubebuilder:validation:XValidation:rule="!has(self.local) || (has(self.type) ? self.type : 'k3s') == 'local'",fieldPath=".local",message="spec.backend.local is read only when spec.backend.type is local"
// +kubebuilder:validation:XValidation:rule="!has(self.k3s) || (has(self.type) ? self.type : 'k3s') == 'k3s'",fieldPath=".k3s",message="spec.backend.k3s is read only when spec.backend.type is k3s"
// +kubebuilder:validation:XValidation:rule="!has(self.k0s) || (has(self.type) ? self.type : 'k3s') == 'k0s'",fieldPath=".k0s",message="spec.backend.k0s is read only when spec.backend.type is k0s"
// +kubebuilder:validation:XValidation:rule="!has(self.vcluster) || (has(self.type) ? self.type : 'k3s') == 'vcluster'",fieldPath=".vcluster",message="spec.backend.vcluster is read only when spec.backend.type is vcluster"
// +kubebuilder:validation:XValidation:rule="!has(self.capi) || (has(self.type) ? self.type : 'k3s') == 'capi'",fieldPath=".capi",message="spec.backend.capi is read only when spec.backend.type is capi"
type Backend struct {
	// Type is the backend (default k3s, upstream's).
	// +kubebuilder:validation:Enum=capi;k0s;k3s;local;vcluster
	// +optional
	Type string `json:"type,omitempty"`
	// HostCluster names the host cluster the members run in (the workers started with
	// --host-cluster-name of that name), for the backends that run in one. A kobe addition.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	HostCluster string `json:"hostCluster,omitempty"`
	// Datastore is a shared datastore server on which each member gets its own database.
	// +optional
	Datastore *Datastore `json:"datastore,omitempty"`

	// Local is the section of the local backend.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	Local *apiextensionsv1.JSON `json:"local,omitempty"`
	// K3s is the section of the k3s backend.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	K3s *apiextensionsv1.JSON `json:"k3s,omitempty"`
	// K0s is the section of the k0s backend.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	K0s *apiextensionsv1.JSON `json:"k0s,omitempty"`
	// VCluster is the section of the vcluster backend (upstream's {chartVersion, values}).
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	VCluster *apiextensionsv1.JSON `json:"vcluster,omitempty"`
	// CAPI is the section of the capi backend (upstream's {infrastructureApiVersion,
	// infrastructureKind, infrastructureSpec, infrastructurePlural}).
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	// +optional
	CAPI *apiextensionsv1.JSON `json:"capi,omitempty"`
}

// Datastore is upstream's shared datastore: a Secret holding the admin connection URL of a
// PostgreSQL, MySQL/MariaDB or NATS server.
type Datastore struct {
	// SecretRef names the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	SecretRef string `json:"secretRef"`
	// SecretKey is the Secret's key holding the URL (default connection-url).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SecretKey string `json:"secretKey,omitempty"`
	// GoldenTemplates: members start from a copy of the pool's golden template database.
	// +optional
	GoldenTemplates *bool `json:"goldenTemplates,omitempty"`
}

// Cluster is the Kubernetes cluster every member is. Beside version, its fields shape the
// members of the backends whose members are pods of a host cluster (k3s, k0s), which judge
// their values.
type Cluster struct {
	// Version of Kubernetes (e.g. v1.37.2, v1.32.0+k3s1).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Version string `json:"version"`
	// Servers is the number of control-plane servers.
	// +optional
	Servers *int `json:"servers,omitempty"`
	// Agents is the number of agent (worker) nodes.
	// +optional
	Agents *int `json:"agents,omitempty"`
	// ServerArgs are extra arguments of the servers.
	// +optional
	ServerArgs []string `json:"serverArgs,omitempty"`
	// Persistence of the servers' data.
	// +optional
	Persistence *Persistence `json:"persistence,omitempty"`
	// Expose says how a member's API server is reached from outside the host cluster.
	// +optional
	Expose *Expose `json:"expose,omitempty"`
}

// Persistence of a member's data (upstream's shape).
type Persistence struct {
	// +optional
	StorageType string `json:"storageType,omitempty"`
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
	// +optional
	StorageRequestSize string `json:"storageRequestSize,omitempty"`
}

// Expose is how a member's API server is reached (upstream's shape).
type Expose struct {
	// +optional
	ExposeType string `json:"exposeType,omitempty"`
	// +optional
	IngressClassName string `json:"ingressClassName,omitempty"`
	// +optional
	NodePort *int32 `json:"nodePort,omitempty"`
}

// Addon is a manifest applied to every member before it is Ready: inline or from a URL.
//
// +kubebuilder:validation:XValidation:rule="(has(self.manifest) && size(self.manifest) > 0) != (has(self.url) && size(self.url) > 0)",message="give exactly one of manifest or url"
type Addon struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// +optional
	Manifest string `json:"manifest,omitempty"`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URL string `json:"url,omitempty"`
}

// Resources of a member's pods (upstream's shape).
type Resources struct {
	// +optional
	Limits map[string]string `json:"limits,omitempty"`
	// +optional
	Requests map[string]string `json:"requests,omitempty"`
}

// HealthCheck of Ready and leased members (0: the default).
type HealthCheck struct {
	// IntervalSeconds between checks (default 30).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	IntervalSeconds int `json:"intervalSeconds,omitempty"`
	// FailureThreshold: failures in a row that recycle a Ready member (default 3).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureThreshold int `json:"failureThreshold,omitempty"`
}

// ReadinessGate is a type-tagged check: each type reads its own fields, needs them, and
// takes no other (an unread field would be ignored).
//
// +kubebuilder:validation:XValidation:rule="!(self.type in ['CRDExists', 'NodesReady', 'DeploymentReady', 'DaemonSetReady', 'URLHealthy', 'SchedulingProbe', 'DNSHealthy', 'InClusterToken', 'X509Valid']) || (has(self.name) && size(self.name) > 0 ? ['name'] : []) + (has(self.namespace) && size(self.namespace) > 0 ? ['namespace'] : []) + (has(self.count) && self.count > 0 ? ['count'] : []) + (has(self.url) && size(self.url) > 0 ? ['url'] : []) + (has(self.serviceAccount) && size(self.serviceAccount) > 0 ? ['serviceAccount'] : []) + (has(self.minRemaining) && size(self.minRemaining) > 0 ? ['minRemaining'] : []) == {'CRDExists': ['name'], 'NodesReady': ['count'], 'DeploymentReady': ['name', 'namespace'], 'DaemonSetReady': ['name', 'namespace'], 'URLHealthy': ['url'], 'SchedulingProbe': ['namespace'], 'DNSHealthy': ['namespace'], 'InClusterToken': ['namespace', 'serviceAccount'], 'X509Valid': ['minRemaining']}[self.type]",messageExpression="'a ' + self.type + ' gate takes ' + {'CRDExists': 'name', 'NodesReady': 'count (more than 0)', 'DeploymentReady': 'name and namespace', 'DaemonSetReady': 'name and namespace', 'URLHealthy': 'url', 'SchedulingProbe': 'namespace', 'DNSHealthy': 'namespace', 'InClusterToken': 'namespace and serviceAccount', 'X509Valid': 'minRemaining'}[self.type] + ', and no other field'"
type ReadinessGate struct {
	// +kubebuilder:validation:Enum=CRDExists;NodesReady;DeploymentReady;DaemonSetReady;URLHealthy;SchedulingProbe;DNSHealthy;InClusterToken;X509Valid
	// +required
	Type string `json:"type"`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Count (NodesReady) is how many nodes must be Ready; 0 is unset.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Count int `json:"count,omitempty"`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URL string `json:"url,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// MinRemaining (X509Valid) is how long the member's certificates must still be valid. A kobe addition.
	// +optional
	MinRemaining DaysDuration `json:"minRemaining,omitempty"`
}

// Scaling makes a pool autoscaled: minReady warm members, at most maxClusters in all.
//
// +kubebuilder:validation:XValidation:rule="(has(self.minReady) ? self.minReady : 1) <= (has(self.maxClusters) ? self.maxClusters : 8)",fieldPath=".minReady",message="spec.scaling.minReady (default 1) must not be more than maxClusters (default 8)"
// +kubebuilder:validation:XValidation:rule="!has(self.schedule) || self.schedule.all(w, !has(w.minReady) || w.minReady <= (has(self.maxClusters) ? self.maxClusters : 8))",fieldPath=".schedule",message="a warm window's minReady must not be more than spec.scaling.maxClusters (default 8)"
// +kubebuilder:validation:XValidation:rule="!has(self.schedule) || self.schedule.all(w, (has(w.timezone) ? w.timezone : \"\") == (has(self.schedule[0].timezone) ? self.schedule[0].timezone : \"\"))",fieldPath=".schedule",message="every warm window of a pool is read in one time zone"
type Scaling struct {
	// MinReady is the warm target (default 1; 0 scales to zero).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MinReady *int `json:"minReady,omitempty"`
	// MaxClusters bounds warm, leased and creating members together (default 8).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxClusters *int `json:"maxClusters,omitempty"`
	// ScaleDownAfter (default 5m).
	// +optional
	ScaleDownAfter Duration `json:"scaleDownAfter,omitempty"`
	// QueueTimeout: a lease waiting longer fails pool_exhausted (default 5m).
	// +optional
	QueueTimeout Duration `json:"queueTimeout,omitempty"`
	// CreatingTimeout bounds a member's creation (default 10m).
	// +optional
	CreatingTimeout Duration `json:"creatingTimeout,omitempty"`
	// ResumeTimeout bounds a wake from sleep (default 5m). A kobe addition.
	// +optional
	ResumeTimeout Duration `json:"resumeTimeout,omitempty"`
	// FailureBackoff spaces creations after consecutive failures.
	// +optional
	FailureBackoff *FailureBackoff `json:"failureBackoff,omitempty"`
	// ThawedSpares is how many Ready members are kept running; the spares beyond them are
	// frozen where the backend can (default 2). A kobe addition.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	ThawedSpares *int `json:"thawedSpares,omitempty"`
	// Schedule: windows of time with another warm target. A kobe addition.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Schedule []WarmWindow `json:"schedule,omitempty"`
}

// FailureBackoff spaces creations after consecutive failures: base, times multiplier per
// failure, at most max.
//
// +kubebuilder:validation:XValidation:rule="[has(self.base) ? self.base : '5s', has(self.max) ? self.max : '2m'].all(d, d.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')) ? duration(has(self.base) ? self.base : '5s') <= duration(has(self.max) ? self.max : '2m') : true",fieldPath=".base",message="spec.scaling.failureBackoff.base (default 5s) must not be longer than max (default 2m)"
type FailureBackoff struct {
	// +optional
	Base Duration `json:"base,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	Multiplier *float64 `json:"multiplier,omitempty"`
	// +optional
	Max Duration `json:"max,omitempty"`
}

// UpgradePolicy bounds drift recycling.
type UpgradePolicy struct {
	// MaxRecycling outdated members torn down at a time (default 1; 0 pauses drift recycling).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxRecycling *int `json:"maxRecycling,omitempty"`
	// MaxSurge members created beyond the warm target while rolling (default 1).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxSurge *int `json:"maxSurge,omitempty"`
	// MinReadyDuringUpgrade (default the warm target).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MinReadyDuringUpgrade *int `json:"minReadyDuringUpgrade,omitempty"`
}

// Certificates (kobe addition): how long a new member's certificates live, and how long
// before they expire a warm member is recycled or a leased one re-issued.
type Certificates struct {
	// Validity of a member's serving and admin certificates (default: the backend's).
	// +optional
	Validity DaysDuration `json:"validity,omitempty"`
	// RecycleBefore (default 30d).
	// +optional
	RecycleBefore DaysDuration `json:"recycleBefore,omitempty"`
}

// Sleep (kobe addition): when a pool's leased clusters are put to sleep without anyone asking,
// and woken.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timezone) || size(self.timezone) == 0 || (has(self.schedule) && size(self.schedule) > 0) || (has(self.wakeSchedule) && size(self.wakeSchedule) > 0)",fieldPath=".timezone",message="spec.sleep.timezone: set without schedule or wakeSchedule, it does nothing"
// +kubebuilder:validation:XValidation:rule="!has(self.schedule) || !has(self.wakeSchedule) || size(self.schedule) == 0 || self.schedule != self.wakeSchedule",fieldPath=".wakeSchedule",message="spec.sleep.wakeSchedule: the same as schedule; the clusters would be put to sleep and woken at once"
// +kubebuilder:validation:XValidation:rule="!has(self.exclude) || size(self.exclude) == 0 || (has(self.afterInactivity) && size(self.afterInactivity) > 0) || (has(self.schedule) && size(self.schedule) > 0) || (has(self.wakeSchedule) && size(self.wakeSchedule) > 0)",fieldPath=".exclude",message="spec.sleep: exclude alone does nothing; give afterInactivity, schedule or wakeSchedule"
type Sleep struct {
	// AfterInactivity sleeps a leased cluster that saw no activity for that long (at least 5s).
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) >= duration('5s')",message="must be at least 5s"
	// +optional
	AfterInactivity Duration `json:"afterInactivity,omitempty"`
	// Schedule puts the pool's leased clusters to sleep (cron, five fields, read in timezone).
	// +optional
	Schedule Cron `json:"schedule,omitempty"`
	// WakeSchedule wakes them (cron, five fields, read in timezone).
	// +optional
	WakeSchedule Cron `json:"wakeSchedule,omitempty"`
	// Timezone of the schedules: an IANA zone name (default UTC).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Timezone string `json:"timezone,omitempty"`
	// Exclude: leases the policy leaves alone.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Exclude []SleepExclusion `json:"exclude,omitempty"`
}

// Cron is a cron expression of five fields (minute hour day-of-month month day-of-week) of
// digits and * , - /; what the numbers may be is kobe's check.
//
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule="self.matches('^ *[0-9*,/-]+( +[0-9*,/-]+){4} *$')",message="must be a cron expression of five fields (minute hour day-of-month month day-of-week) of digits and * , - /"
type Cron string

// SleepExclusion picks leases the sleep policy leaves alone; every field set must match.
//
// +kubebuilder:validation:XValidation:rule="(has(self.owner) && size(self.owner) > 0) || (has(self.alias) && size(self.alias) > 0) || (has(self.metadata) && size(self.metadata) > 0)",message="give at least one of owner, alias or metadata"
type SleepExclusion struct {
	// Owner is a glob on the lease's owner.
	// +optional
	Owner string `json:"owner,omitempty"`
	// Alias is a glob on the lease's alias.
	// +optional
	Alias string `json:"alias,omitempty"`
	// Metadata entries the lease must carry with exactly these values.
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// WarmWindow (kobe addition) is a stretch of time with another warm target: it starts when
// cron fires (read in timezone) and lasts duration of wall-clock time.
type WarmWindow struct {
	// +required
	Cron Cron `json:"cron"`
	// Duration: whole minutes, between 1m and 168h. (The API server checks whole minutes to the
	// millisecond; kobe refuses a remainder of less than that too.)
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || (duration(self) >= duration('1m') && duration(self) <= duration('168h') && duration(self).getMilliseconds() % 60000 == 0)",message="must be whole minutes between 1m and 168h"
	// +required
	Duration Duration `json:"duration"`
	// MinReady is the warm target during the window.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +required
	MinReady *int `json:"minReady"`
	// Timezone: an IANA zone name (default UTC); every window of a pool names the same one.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Timezone string `json:"timezone,omitempty"`
}

// Diagnostics is upstream's spec.diagnostics (refused by this version of kobe).
type Diagnostics struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	Storage string `json:"storage,omitempty"`
	// +optional
	RetentionDays *int `json:"retentionDays,omitempty"`
	// +optional
	LogLines *int `json:"logLines,omitempty"`
	// +optional
	IncludeSecrets *bool `json:"includeSecrets,omitempty"`
}

// Snapshot is upstream's spec.snapshot (refused by this version of kobe).
type Snapshot struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	VeleroNamespace string `json:"veleroNamespace,omitempty"`
	// +optional
	StorageLocation string `json:"storageLocation,omitempty"`
	// +optional
	GoldenPrefix string `json:"goldenPrefix,omitempty"`
	// +optional
	TTL string `json:"ttl,omitempty"`
	// +optional
	RefreshOn string `json:"refreshOn,omitempty"`
}

// ClusterPoolStatus is the pool as kobe last saw it: upstream's fields, with kobe's
// conditions and the generation of the spec they describe.
type ClusterPoolStatus struct {
	// ObservedGeneration is the metadata.generation of the spec kobe last applied (or refused).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase of the pool as a whole.
	// +kubebuilder:validation:Enum=Healthy;ScalingUp;ScalingDown;Backoff;Failing;Idle;Draining;Unknown
	// +optional
	Phase string `json:"phase,omitempty"`
	// Members by state.
	// +optional
	Ready int `json:"ready"`
	// +optional
	Leased int `json:"leased"`
	// +optional
	Creating int `json:"creating"`
	// +optional
	Recycling int `json:"recycling"`
	// +optional
	Unhealthy int `json:"unhealthy"`
	// +optional
	Quarantined int `json:"quarantined"`
	// Outdated members are of an earlier spec, waiting to be rolled. A kobe addition.
	// +optional
	Outdated int `json:"outdated"`
	// QueueDepth is the number of leases waiting for a member.
	// +optional
	QueueDepth int `json:"queueDepth"`
	// ConsecutiveFailures of member creations (Failing from 3).
	// +optional
	ConsecutiveFailures int `json:"consecutiveFailures"`
	// LastFailureReason is why the last creation failed.
	// +optional
	LastFailureReason string `json:"lastFailureReason,omitempty"`
	// NextAttemptAt is when the next creation is tried, while backing off.
	// +optional
	NextAttemptAt *metav1.Time `json:"nextAttemptAt,omitempty"`
	// Conditions with reasons (e.g. Ready, Applied).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
