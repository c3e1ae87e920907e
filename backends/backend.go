// Package backends defines the runtime backend contract (v1) that every kind of cluster kobe
// manages implements, the optional capabilities a backend may add, and the registry of the
// backends compiled into this binary. A pool names its backend with spec.backend.type.
//
// The contract is small on purpose, as Cluster API's provider contract: what every backend must
// do is in RuntimeBackend; what only some can do (sleep, certificate rotation, preflight,
// host binding) is a separate interface discovered at run time with a type assertion, and shown in
// the capability matrix (`kobe backends`). testsuite/conformance checks every backend against it.
package backends

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kunobi-ninja/kobe/api"
)

// ContractVersion is the version of RuntimeBackend; a backend states the one it implements.
const ContractVersion = "v1"

// Phase of an instance as its backend sees it.
type Phase string

const (
	PhaseCreating  Phase = "Creating"
	PhaseReady     Phase = "Ready"
	PhaseUnhealthy Phase = "Unhealthy" // it existed and worked, and now does not (e.g. a process died)
	PhaseFailed    Phase = "Failed"    // it never became ready
	PhaseSleeping  Phase = "Sleeping"
	PhaseFrozen    Phase = "Frozen" // its processes are stopped in place (Freezer); Thaw resumes them at once
	PhaseGone      Phase = "Gone"   // nothing of it remains
)

// ErrNotFound is returned for an instance id the backend has no trace of.
var ErrNotFound = errors.New("instance not found")

// ErrUnavailableHere wraps the error of an optional capability that the backend implements but
// that its host cannot provide (e.g. Freeze where no cgroup freezer can be used).
var ErrUnavailableHere = errors.New("not available on this host")

// InstanceSpec is what a backend needs to create one instance.
type InstanceSpec struct {
	// ID is unique across kobe and is the idempotency key of Create.
	ID string `json:"id"`
	// Pool names the pool the instance belongs to (labels, naming).
	Pool string `json:"pool"`
	// KubernetesVersion is spec.cluster.version of the pool.
	KubernetesVersion string `json:"kubernetesVersion"`
	// Options is the backend's own section of the pool spec (spec.backend.<type>), as JSON.
	Options json.RawMessage `json:"options,omitempty"`
	// CertificateValidity is spec.certificates.validity: the lifetime of the instance's
	// serving and admin certificates (0: the backend's default). Only a CertManager reads it;
	// the pool apply refuses it for the other backends.
	CertificateValidity time.Duration `json:"certificateValidity,omitempty"`
	// Golden is the generation of the pool's golden template the instance starts from (see
	// GoldenTemplater); "" for an instance that starts empty.
	Golden string `json:"golden,omitempty"`
}

// InstanceStatus is what a backend reports about one instance.
type InstanceStatus struct {
	ID       string `json:"id"`
	Phase    Phase  `json:"phase"`
	Endpoint string `json:"endpoint,omitempty"`
	// Host is where the instance runs, for backends bound to one host (see HostBound).
	Host      string    `json:"host,omitempty"`
	Message   string    `json:"message,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitempty"`
}

// CredentialRequest asks for a kubeconfig. An empty User asks for the instance's admin
// credential; otherwise a per-lease credential for User, valid for TTL (the lease's TTL).
type CredentialRequest struct {
	User string        `json:"user,omitempty"`
	TTL  time.Duration `json:"ttl,omitempty"`
}

// Credential is a kubeconfig and what kobe needs to track it. Kubeconfig holds secret material:
// it must not be logged nor stored in workflow history in plain text.
type Credential struct {
	Kubeconfig []byte    `json:"-"`
	User       string    `json:"user"`
	ExpiresAt  time.Time `json:"expiresAt"`
	// ID identifies the credential (e.g. a certificate serial) for audit and revocation.
	ID string `json:"id"`
}

// RuntimeBackend is the v1 contract.
type RuntimeBackend interface {
	// Name is the value of spec.backend.type that selects this backend.
	Name() string
	// Validate checks a spec without side effects; errors name the offending field.
	Validate(spec InstanceSpec) error
	// Create starts creating the instance and returns without waiting for it to be ready.
	// Calling it again with the same ID neither duplicates nor disturbs the instance.
	Create(ctx context.Context, spec InstanceSpec) (InstanceStatus, error)
	// Status reports the instance's state now; ErrNotFound if the backend has no trace of it.
	Status(ctx context.Context, id string) (InstanceStatus, error)
	// WaitReady blocks until the instance is Ready, has failed, or ctx ends. It calls progress
	// (if not nil) now and then, so that a heartbeating activity can report liveness.
	WaitReady(ctx context.Context, id string, progress func(InstanceStatus)) (InstanceStatus, error)
	// Credentials issues a kubeconfig (admin, or per-lease when req.User is set).
	Credentials(ctx context.Context, id string, req CredentialRequest) (Credential, error)
	// RevokeCredentials makes a per-lease credential stop working before it expires.
	RevokeCredentials(ctx context.Context, id, user string) error
	// Delete removes the instance and verifies that nothing of it remains. Deleting an
	// instance that is already gone succeeds.
	Delete(ctx context.Context, id string) error
}

// Sleeper is a backend that can stop an instance's compute and start it again with its data.
// An instance whose data would not survive its sleep refuses it with an error wrapping
// ErrSleepRefused, changing nothing.
type Sleeper interface {
	Sleep(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
}

// ActivityReporter is a backend that observes the requests a lease's own identity (a per-lease
// credential: user kobe:lease:<id>) makes to an instance, so that a pool's
// spec.sleep.afterInactivity sleeps a lease whose kubeconfig is not used, not only one whose
// holder does not call kobe. Requests of kobe's own identities (health checks, the admin
// credential) do not count. The local backend reads its API server's audit log.
type ActivityReporter interface {
	// LastActivity is when the instance last received a request from a lease's identity; zero
	// when it received none. An instance that cannot say (it was started without the record)
	// returns an error wrapping ErrUnavailableHere.
	LastActivity(ctx context.Context, id string) (time.Time, error)
}

// ErrSleepRefused: this instance cannot sleep without losing its state (the error says why).
var ErrSleepRefused = errors.New("this instance cannot sleep")

// SleepRequirement is a Sleeper whose instances sleep only when their spec keeps their data:
// SleepRequirement says what that takes (the capability matrix shows it), SleepsWith whether
// instances of these options (InstanceSpec.Options) do (a pool's view shows it).
type SleepRequirement interface {
	SleepRequirement() string
	SleepsWith(options json.RawMessage) bool
}

// Freezer is a backend that can stop a Ready instance's processes in place and resume them at
// once (the local backend: the cgroup freezer). Unlike Sleep, nothing is stopped or restarted:
// a frozen instance keeps its memory and uses no CPU, and a thawed one answers again within
// milliseconds, so spare pool members can be frozen and woken on claim. A frozen instance
// reports PhaseFrozen and does not serve. Thaw returns once the instance answers again (a warm
// bind grants the member on its success), an error if it does not. Freeze of a frozen and Thaw
// of a running instance succeed; Delete and Sleep work on a frozen instance. Where the host cannot freeze, Freeze
// returns an error wrapping ErrUnavailableHere.
type Freezer interface {
	Freeze(ctx context.Context, id string) error
	Thaw(ctx context.Context, id string) error
}

// DownNotifier is a backend that notices at once when an instance it runs stops serving on its
// own (a process exited, a pod failed), rather than at the next health check. A warm bind takes
// a Ready member without calling it, so the pool must learn of such a death before the next
// claim, not up to a health interval later. NotifyDown sets the function called (from any
// goroutine, never while the backend holds a lock) with the instance and what happened; stops
// kobe asked for (Delete, Sleep, Freeze) are not reported.
type DownNotifier interface {
	NotifyDown(func(id, message string))
}

// CertManager is a backend that knows when an instance's certificates expire and can re-issue
// them in place. RotateCertificates issues new serving and admin certificates from the same CA,
// with the validity the instance was created with, so that every kubeconfig already issued
// (its CA data, its client certificate) keeps working and no data is lost; an instance that
// sleeps gets its new certificates without being woken. A CertManager honours
// InstanceSpec.CertificateValidity (spec.certificates.validity).
type CertManager interface {
	// CertificatesExpireAt is the earliest of CertificateExpiry's times.
	CertificatesExpireAt(ctx context.Context, id string) (time.Time, error)
	// CertificateExpiry says when each of the instance's certificates expires.
	CertificateExpiry(ctx context.Context, id string) (CertificateExpiry, error)
	RotateCertificates(ctx context.Context, id string) error
}

// CertificateExpiry is when each kind of an instance's certificates expires.
type CertificateExpiry struct {
	// CA is the instance's certificate authority (RotateCertificates keeps it).
	CA time.Time `json:"ca"`
	// Serving is the API server's serving certificate.
	Serving time.Time `json:"serving"`
	// Client is the admin client certificate kobe keeps (per-lease certificates end with
	// their lease, and never outlive the CA).
	Client time.Time `json:"client"`
}

// Certificate kinds (the kind label of kobe_instance_cert_expiry_seconds).
const (
	CertKindCA      = "ca"
	CertKindServing = "serving"
	CertKindClient  = "client"
)

// Earliest is the first of the three expiries (zero if none is known).
func (e CertificateExpiry) Earliest() time.Time {
	var t time.Time
	for _, x := range []time.Time{e.CA, e.Serving, e.Client} {
		if !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	return t
}

// Leaves is the first expiry of the certificates RotateCertificates re-issues (serving, client).
func (e CertificateExpiry) Leaves() time.Time {
	return CertificateExpiry{Serving: e.Serving, Client: e.Client}.Earliest()
}

// HostBound is implemented by backends whose instances live on one kobe host (the local
// backend): their activities must run on that host's task queue.
type HostBound interface {
	HostID() string
}

// SyncErrorReporter is a backend whose instances carry objects over to a host (vcluster's
// syncer puts a virtual cluster's pods into its host namespace) and that can say which objects
// the host refused. The pool's health check asks it about its leased members, so that the
// lease shows why a workload never appears (condition Synced, reason codes in api).
type SyncErrorReporter interface {
	// SyncErrors lists the objects that could not be synced, newest first.
	SyncErrors(ctx context.Context, id string) ([]SyncError, error)
}

// SyncError is one object the instance could not sync onto its host.
type SyncError struct {
	// Reason is one of api's sync reason codes (api.ReasonSyncDenied, …).
	Reason api.ReasonCode `json:"reason"`
	// Object is "Kind namespace/name" inside the instance.
	Object  string    `json:"object"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last"`
}

// Preflighter is a backend whose specs can only be judged against its environment (e.g. the
// Cluster API backend asks its management cluster whether an infrastructure kind, a
// ClusterClass or a variable exists). Preflight has no side effects; the pool apply path calls
// it, so that a bad spec is refused before anything is created, and Create calls it too.
type Preflighter interface {
	Preflight(ctx context.Context, spec InstanceSpec) error
}

// PreflightScoper is a Preflighter whose specs need their environment judged only sometimes
// (the local backend: only a spec with a shared datastore). The pool apply asks the backend's
// prototype, without I/O, and skips the round trip to a worker when the answer is no.
type PreflightScoper interface {
	NeedsPreflight(spec InstanceSpec) bool
}

// invalidSpecError marks an error that says the spec is wrong, not that the backend or its
// environment failed: retrying the same spec cannot succeed.
type invalidSpecError struct{ err error }

func (e invalidSpecError) Error() string { return e.err.Error() }
func (e invalidSpecError) Unwrap() error { return e.err }

// InvalidSpec marks err (from Create or Preflight) as a refusal of the spec itself.
func InvalidSpec(err error) error {
	if err == nil {
		return nil
	}
	return invalidSpecError{err}
}

// IsInvalidSpec reports whether err refuses the spec (see InvalidSpec).
func IsInvalidSpec(err error) bool {
	var e invalidSpecError
	return errors.As(err, &e)
}

// LeasePreparer is a backend whose per-lease credentials can be made ready before any lease
// claims the instance, so that binding a lease costs no round trip to the instance. When an
// instance becomes Ready, PrepareLeaseCredentials does the slow part once: it makes, in the
// instance, the identity of its next holder (an instance has one holder in its life: it is
// never reused), grants it what a lease may do, waits until the instance's authorizer honours
// the grant, and returns a bearer token of that identity. RevokeCredentials of a lease bound
// this way deletes the identity, and with it every token of it.
//
// What is prepared can only ever be that one identity in that one instance: it is a token, not
// a key. A signing key the API server trusts (the cluster's CA, or any client CA) could sign a
// certificate naming the group system:masters, which no RBAC rule can take away, or a serving
// certificate; a token of a ServiceAccount can do neither.
type LeasePreparer interface {
	PrepareLeaseCredentials(ctx context.Context, id string) (PreparedCredential, error)
}

// PreparedCredential is what an instance's lease is bound with without calling the instance:
// the address of its API server and a token of its holder's identity. The token is a secret:
// it is sealed before it is stored, never logged, never in a workflow's history.
type PreparedCredential struct {
	// Cluster names the cluster in the kubeconfig; Server is its API address and ServerCAPEM
	// the CA the client trusts it with.
	Cluster     string `json:"cluster"`
	Server      string `json:"server"`
	ServerCAPEM []byte `json:"serverCa"`
	// User is the Kubernetes user the token authenticates as; Token is the bearer token,
	// valid until ExpiresAt unless its identity is deleted first.
	User      string    `json:"user,omitempty"`
	Token     string    `json:"token,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitempty"`
	// TokenID is the uid of the token's identity (its ServiceAccount's), which the instance's
	// audit log records: it names this holder, never the token.
	TokenID string `json:"tokenId,omitempty"`
}
