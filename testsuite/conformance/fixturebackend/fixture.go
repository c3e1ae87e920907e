// Package fixturebackend is a backend that exists to keep one promise true: adding a backend to
// kobe is adding one package and one import line (docs/backends/adding.md). It registers itself
// from init, owns its manifest section (spec.backend.fixture), uses the shared per-instance lock,
// and passes testsuite/conformance without any tool: an instance is an HTTPS server in the test
// process that speaks the part of the Kubernetes API the suite uses (namespaces and ConfigMaps),
// authenticates client certificates of the instance's own CA on every request, and forbids a
// revoked user. Only tests import it.
package fixturebackend

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// Name is spec.backend.type for this backend.
const Name = "fixture"

func init() {
	backends.Register(backends.Factory{
		Name:        Name,
		Description: "test fixture: in-process API servers speaking the part of the Kubernetes API the conformance suite uses",
		New:         func(backends.Environment) (backends.RuntimeBackend, error) { return &Backend{}, nil },
		Prototype:   &Backend{},
		// No trait: its instances run in the test process, read no shared part of the manifest,
		// cannot sleep and prepare no credential.
		Traits:  backends.Traits{},
		Options: poolOptions,
	})
}

// Options is spec.backend.fixture.
type Options struct {
	// Greeting is kept in every instance's ConfigMap kube-public/fixture, so that a test can see
	// the manifest's section reach the instance.
	Greeting string `json:"greeting,omitempty"`
}

// parseOptions reads a section strictly: a field the fixture does not know is refused by name.
func parseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("spec.backend.%s: %v", Name, err)
	}
	return o, nil
}

// poolOptions is the registration's Options: the section, checked, in one canonical form, so
// that the same manifest always makes the same options (no drift).
func poolOptions(sec backends.PoolSection) (json.RawMessage, error) {
	o, err := parseOptions(sec.Own)
	if err != nil || o == (Options{}) {
		return nil, err
	}
	return json.Marshal(o)
}

// Backend is the fixture backend. The zero value is ready to use.
type Backend struct {
	locks     backends.InstanceLocks
	mu        sync.Mutex
	instances map[string]*instance
}

type instance struct {
	status backends.InstanceStatus
	server *http.Server
	ca     *pki.CA
	api    *apiServer
}

// Name implements backends.RuntimeBackend.
func (b *Backend) Name() string { return Name }

// Validate implements backends.RuntimeBackend.
func (b *Backend) Validate(spec backends.InstanceSpec) error {
	if spec.ID == "" {
		return errors.New("id: required")
	}
	if spec.KubernetesVersion == "" {
		return errors.New("spec.cluster.version: required")
	}
	_, err := parseOptions(spec.Options)
	return err
}

// Create implements backends.RuntimeBackend: the instance's CA, its API server on a loopback
// port, and the ConfigMap kube-public/fixture. A second Create of the same id returns the
// instance as it is.
func (b *Backend) Create(_ context.Context, spec backends.InstanceSpec) (backends.InstanceStatus, error) {
	if err := b.Validate(spec); err != nil {
		return backends.InstanceStatus{}, backends.InvalidSpec(err)
	}
	defer b.locks.Lock(spec.ID)()
	if in, ok := b.get(spec.ID); ok {
		return in.status, nil
	}
	options, _ := parseOptions(spec.Options)
	ca, err := pki.NewCA("fixture-ca-"+spec.ID, 10*365*24*time.Hour)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	issued, err := ca.IssueServing("fixture-apiserver", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, 365*24*time.Hour)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	serving, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	api := newAPIServer(ca.Cert)
	api.put("/api/v1/namespaces/kube-public", "", &corev1.Namespace{})
	api.put("/api/v1/namespaces/kube-public/configmaps/fixture", "kube-public", &corev1.ConfigMap{Data: map[string]string{"greeting": options.Greeting}})
	srv := &http.Server{
		Handler:           api,
		TLSConfig:         api.tlsConfig(serving),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // refused handshakes are the suite's business
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	in := &instance{
		status: backends.InstanceStatus{ID: spec.ID, Phase: backends.PhaseReady, Endpoint: "https://" + ln.Addr().String(),
			CreatedAt: time.Now().UTC().Truncate(time.Second)},
		server: srv, ca: ca, api: api,
	}
	b.mu.Lock()
	if b.instances == nil {
		b.instances = map[string]*instance{}
	}
	b.instances[spec.ID] = in
	b.mu.Unlock()
	return in.status, nil
}

func (b *Backend) get(id string) (*instance, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	in, ok := b.instances[id]
	return in, ok
}

// Status implements backends.RuntimeBackend.
func (b *Backend) Status(_ context.Context, id string) (backends.InstanceStatus, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.InstanceStatus{}, fmt.Errorf("%s: %w", id, backends.ErrNotFound)
	}
	return in.status, nil
}

// WaitReady implements backends.RuntimeBackend: an instance serves as soon as it is created.
func (b *Backend) WaitReady(ctx context.Context, id string, progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	st, err := b.Status(ctx, id)
	if err == nil && progress != nil {
		progress(st)
	}
	return st, err
}

// Credentials implements backends.RuntimeBackend: a client certificate of the instance's CA,
// for the admin (a year) or for req.User until req.TTL has passed.
func (b *Backend) Credentials(_ context.Context, id string, req backends.CredentialRequest) (backends.Credential, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.Credential{}, fmt.Errorf("%s: %w", id, backends.ErrNotFound)
	}
	user, ttl := req.User, req.TTL
	if user == "" {
		user, ttl = adminUser, 365*24*time.Hour
	}
	if ttl <= 0 {
		return backends.Credential{}, errors.New("a per-lease credential needs a TTL")
	}
	cert, err := in.ca.IssueClientUntil(user, nil, time.Now().Add(ttl))
	if err != nil {
		return backends.Credential{}, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[id] = &clientcmdapi.Cluster{Server: in.status.Endpoint, CertificateAuthorityData: in.ca.CertPEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert.CertPEM, ClientKeyData: cert.KeyPEM}
	kc.Contexts[id] = &clientcmdapi.Context{Cluster: id, AuthInfo: user}
	kc.CurrentContext = id
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return backends.Credential{}, err
	}
	return backends.Credential{Kubeconfig: raw, User: user, ExpiresAt: cert.NotAfter, ID: cert.Serial}, nil
}

// RevokeCredentials implements backends.RuntimeBackend: the user's requests are forbidden
// from now on, as an API server's authorizer forbids a user whose binding is gone.
func (b *Backend) RevokeCredentials(_ context.Context, id, user string) error {
	in, ok := b.get(id)
	if !ok {
		return fmt.Errorf("%s: %w", id, backends.ErrNotFound)
	}
	in.api.revoke(user)
	return nil
}

// Delete implements backends.RuntimeBackend: the server stops and its connections close; the
// instance's objects lived in its memory only.
func (b *Backend) Delete(_ context.Context, id string) error {
	defer b.locks.Lock(id)()
	in, ok := b.get(id)
	if !ok {
		return nil
	}
	if err := in.server.Close(); err != nil {
		return fmt.Errorf("%s: stopping its server: %w", id, err)
	}
	b.mu.Lock()
	delete(b.instances, id)
	b.mu.Unlock()
	return nil
}
