package hosted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/datastore"
)

// DatastoreOptions is upstream's spec.backend.datastore: a shared datastore server (PostgreSQL,
// MySQL/MariaDB, NATS) on which each instance gets its own database and role, instead of the
// servers' embedded one. secretRef names a Secret of the host cluster, in the instance's
// namespace, whose key secretKey (default connection-url) holds the admin connection URL.
// That URL must be reachable from the worker (which provisions) and from the server pods (which
// get the instance's own URL, with the same host and port).
type DatastoreOptions struct {
	SecretRef string `json:"secretRef"`
	SecretKey string `json:"secretKey,omitempty"`
	// GoldenTemplates: members start from a copy of the pool's golden template (golden.go);
	// PostgreSQL and MySQL/MariaDB only (checked at preflight, which reads the URL).
	GoldenTemplates *bool `json:"goldenTemplates,omitempty"`
}

// Key is the Secret's key of the admin URL.
func (d *DatastoreOptions) Key() string {
	if d.SecretKey == "" {
		return datastore.DefaultSecretKey
	}
	return d.SecretKey
}

var secretKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// parseDatastore checks the shape (no I/O).
func parseDatastore(raw json.RawMessage) (*DatastoreOptions, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	d := &DatastoreOptions{}
	if err := strictDecode(raw, d); err != nil {
		return nil, fmt.Errorf("spec.backend.datastore: %s", err)
	}
	if d.SecretRef == "" {
		return nil, errors.New("spec.backend.datastore.secretRef: required (the name of the host cluster's Secret holding the admin connection URL)")
	}
	if !dnsSubdomain.MatchString(d.SecretRef) || len(d.SecretRef) > 253 {
		return nil, fmt.Errorf("spec.backend.datastore.secretRef: %q is not a Secret name", d.SecretRef)
	}
	if k := d.Key(); !secretKeyPattern.MatchString(k) || len(k) > 253 {
		return nil, fmt.Errorf("spec.backend.datastore.secretKey: %q is not a Secret key (letters, digits, '-', '_', '.')", k)
	}
	return d, nil
}

// datastoreRef is what the CA Secret (the instance's anchor) keeps of the datastore, so that
// Delete can drop the instance's database: where the admin URL is, never the URL.
type datastoreRef struct {
	SecretRef string `json:"secretRef"`
	SecretKey string `json:"secretKey"`
}

// datastoreSecretName holds the instance's own connection URL (key endpointKey), read by the
// servers from their environment: it is in no command line and no ConfigMap.
func datastoreSecretName(id string) string { return id + "-datastore" }

const endpointKey = "endpoint"

// ComponentDatastore labels the Secret with the instance's own connection URL.
const ComponentDatastore = "datastore"

// datastoreServer reads the operator's Secret in namespace and parses the admin URL. A missing
// Secret or key, or a URL that is not one of the drivers', is the spec's fault.
func (b *Backend) datastoreServer(ctx context.Context, namespace string, ref datastoreRef) (*datastore.Server, error) {
	field := "spec.backend.datastore"
	s, err := b.kube.CoreV1().Secrets(namespace).Get(ctx, ref.SecretRef, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, backends.InvalidSpec(fmt.Errorf("%s.secretRef: the host cluster has no Secret %s/%s", field, namespace, ref.SecretRef))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading Secret %s/%s: %w", field, namespace, ref.SecretRef, err)
	}
	data, ok := s.Data[ref.SecretKey]
	if !ok {
		return nil, backends.InvalidSpec(fmt.Errorf("%s.secretKey: Secret %s/%s has no key %q", field, namespace, ref.SecretRef, ref.SecretKey))
	}
	url := strings.TrimSpace(string(data))
	if url == "" {
		return nil, backends.InvalidSpec(fmt.Errorf("%s.secretKey: key %q of Secret %s/%s is empty", field, ref.SecretKey, namespace, ref.SecretRef))
	}
	server, err := datastore.Parse(url)
	if err != nil {
		return nil, backends.InvalidSpec(fmt.Errorf("%s: Secret %s/%s key %q: %w", field, namespace, ref.SecretRef, ref.SecretKey, err))
	}
	return server, nil
}

// preflightDatastore: the Secret and key exist, the URL parses and the server answers (and can
// provision). An unreachable server is not the spec's fault (503 at apply, not 400).
func (b *Backend) preflightDatastore(ctx context.Context, p Parsed) error {
	if p.SharedDatastore == nil {
		return nil
	}
	s, err := b.datastoreServer(ctx, p.Namespace, datastoreRef{SecretRef: p.SharedDatastore.SecretRef, SecretKey: p.SharedDatastore.Key()})
	if err != nil {
		return err
	}
	if err := checkGolden(p.SharedDatastore, s); err != nil {
		return err
	}
	return s.Ping(ctx)
}

// ensureDatabase gives the instance its own database and role, keeps its connection URL in the
// Secret <id>-datastore and returns it; a retried Create finds the Secret and returns what it
// holds (provisioning again would change the password under running servers). A crash between
// provisioning and the Secret is repaired by the next Create: Provision is idempotent and sets
// a new password. "" without a shared datastore.
//
// fresh says the instance was new in this Create: a database of its name can then only be a
// stale one (an earlier instance of the same id whose drop did not happen), whose data the
// servers would take as theirs (k3s refuses bootstrap data encrypted with another token), so it
// is dropped first.
func (b *Backend) ensureDatabase(ctx context.Context, spec backends.InstanceSpec, p Parsed, ca *corev1.Secret, fresh bool) (string, error) {
	if p.SharedDatastore == nil {
		return "", nil
	}
	name := datastoreSecretName(spec.ID)
	got, err := b.kube.CoreV1().Secrets(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil && len(got.Data[endpointKey]) > 0 {
		return string(got.Data[endpointKey]), nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading Secret %s/%s: %w", p.Namespace, name, err)
	}
	s, err := b.datastoreServer(ctx, p.Namespace, datastoreRef{SecretRef: p.SharedDatastore.SecretRef, SecretKey: p.SharedDatastore.Key()})
	if err != nil {
		return "", err
	}
	if fresh {
		if err := s.Drop(ctx, spec.ID); err != nil {
			return "", err
		}
	}
	var made datastore.Instance
	if template := templateOf(spec, p); template != "" {
		made, err = s.ProvisionFrom(ctx, spec.ID, template)
	} else {
		made, err = s.Provision(ctx, spec.ID)
	}
	if err != nil {
		return "", err
	}
	secret := renderDatastoreSecret(b.distro, spec.ID, spec.Pool, p.Namespace, made.DSN.Reveal())
	secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: ca.Name, UID: ca.UID}}
	if _, err := b.kube.CoreV1().Secrets(p.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating Secret %s/%s: %w", p.Namespace, name, err)
	}
	return made.DSN.Reveal(), nil
}

func renderDatastoreSecret(d Distro, id, pool, namespace, endpoint string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: datastoreSecretName(id), Namespace: namespace, Labels: labels(d, id, pool, ComponentDatastore)},
		Data:       map[string][]byte{endpointKey: []byte(endpoint)},
	}
}

// dropDatabase drops the instance's database and role, and verifies they are gone. The CA
// Secret says whether there is one and where the admin URL is.
func (b *Backend) dropDatabase(ctx context.Context, ca *corev1.Secret) error {
	var shape instanceShape
	_ = json.Unmarshal([]byte(ca.Annotations[shapeAnnotation]), &shape)
	if shape.Datastore == nil {
		return nil
	}
	id := ca.Labels[LabelInstance]
	s, err := b.datastoreServer(ctx, ca.Namespace, *shape.Datastore)
	if err != nil {
		return fmt.Errorf("instance %s: cannot drop its database: %w", id, err)
	}
	return s.Drop(ctx, id)
}

// DatastoreEndpoint reads an instance's own connection URL (tests compare it with the
// datastore's objects; it is a secret: do not log it).
func (b *Backend) DatastoreEndpoint(ctx context.Context, id string) (datastore.DSN, error) {
	ca, err := b.findCA(ctx, id)
	if err != nil {
		return datastore.DSN{}, err
	}
	s, err := b.kube.CoreV1().Secrets(ca.Namespace).Get(ctx, datastoreSecretName(id), metav1.GetOptions{})
	if err != nil {
		return datastore.DSN{}, err
	}
	return datastore.NewDSN(string(s.Data[endpointKey])), nil
}

// templateOf is the golden template an instance's database is copied from ("": none).
func templateOf(spec backends.InstanceSpec, p Parsed) string {
	if spec.Golden == "" || !p.SharedDatastore.Golden() {
		return ""
	}
	return backends.GoldenTemplateID(spec)
}
