package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/datastore"
)

// DatastoreOptions is spec.backend.local.datastore: a shared datastore server (PostgreSQL,
// MySQL/MariaDB, NATS) on which each instance gets its own database, instead of its own SQLite
// file. The shape is upstream's spec.backend.datastore.
//
// On the local backend a Secret is a folder of the worker: secretRef names the folder
// <secrets dir>/<secretRef>/ and secretKey the file in it that holds the admin connection URL.
// That is the layout of a Kubernetes Secret mounted as a volume at <secrets dir>/<secretRef>,
// so a worker in a pod mounts the operator's Secret and the same manifest works. The secrets
// dir is $KOBE_SECRETS_DIR, else <state dir>/secrets.
type DatastoreOptions struct {
	SecretRef string `json:"secretRef"`
	// SecretKey is the file in the secret's folder (default connection-url).
	SecretKey string `json:"secretKey,omitempty"`
	// GoldenTemplates: the pool's members start from a copy of its golden template (a
	// database with the pool's addons applied, see golden.go) instead of an empty database.
	// PostgreSQL and MySQL/MariaDB only (Preflight refuses it on NATS).
	GoldenTemplates *bool `json:"goldenTemplates,omitempty"`
}

// secretRefPattern is a Kubernetes Secret name (a DNS subdomain), which can never leave the
// secrets dir; secretKeyPattern a Secret's data key.
var (
	secretRefPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	secretKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

func (d *DatastoreOptions) key() string {
	if d.SecretKey == "" {
		return datastore.DefaultSecretKey
	}
	return d.SecretKey
}

// validate checks the shape (no I/O).
func (d *DatastoreOptions) validate() error {
	if d.SecretRef == "" {
		return errors.New("spec.backend.local.datastore.secretRef: required (the name of the secret holding the admin connection URL)")
	}
	if !secretRefPattern.MatchString(d.SecretRef) || len(d.SecretRef) > 253 {
		return fmt.Errorf("spec.backend.local.datastore.secretRef: %q is not a Secret name (lowercase DNS subdomain)", d.SecretRef)
	}
	if k := d.key(); !secretKeyPattern.MatchString(k) || k == "." || k == ".." || len(k) > 253 {
		return fmt.Errorf("spec.backend.local.datastore.secretKey: %q is not a Secret key (letters, digits, '-', '_', '.')", k)
	}
	return nil
}

func (d *DatastoreOptions) golden() bool { return d.GoldenTemplates != nil && *d.GoldenTemplates }

// datastoreRecord is what an instance on a shared datastore keeps in its record: where the
// admin URL is (to drop the database at Delete) and what was made. Never the URL itself.
type datastoreRecord struct {
	SecretRef string           `json:"secretRef"`
	SecretKey string           `json:"secretKey"`
	Driver    datastore.Driver `json:"driver"`
	Name      string           `json:"name"`
	// Template is the id of the golden template the database was copied from ("" for none).
	Template string `json:"template,omitempty"`
}

// dsnFile is the instance's own connection URL (0600 in its directory): kine is given it in
// its environment, never on its command line (which every local user can read).
const dsnFile = "datastore.dsn"

// server resolves a secret reference on this worker and parses the admin URL. A missing
// secret, key or an unsupported URL is the spec's fault (backends.InvalidSpec).
func (b *Backend) server(secretRef, secretKey string) (*datastore.Server, error) {
	field := "spec.backend.local.datastore"
	path := filepath.Join(b.secretsDir, secretRef, secretKey)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, derr := os.Stat(filepath.Join(b.secretsDir, secretRef)); derr != nil {
			return nil, backends.InvalidSpec(fmt.Errorf("%s.secretRef: secret %q not found on this worker (no folder %s; the local backend reads secrets from $KOBE_SECRETS_DIR/<secretRef>/<secretKey>)", field, secretRef, filepath.Join(b.secretsDir, secretRef)))
		}
		return nil, backends.InvalidSpec(fmt.Errorf("%s.secretKey: secret %q has no key %q (no file %s)", field, secretRef, secretKey, path))
	case err != nil:
		return nil, fmt.Errorf("%s: reading secret %q: %w", field, secretRef, err)
	}
	url := strings.TrimSpace(string(data))
	if url == "" {
		return nil, backends.InvalidSpec(fmt.Errorf("%s.secretKey: key %q of secret %q is empty", field, secretKey, secretRef))
	}
	s, err := datastore.Parse(url)
	if err != nil {
		return nil, backends.InvalidSpec(fmt.Errorf("%s: secret %q key %q: %w", field, secretRef, secretKey, err))
	}
	return s, nil
}

// Preflight implements backends.Preflighter: with a datastore, the secret is read and the
// server asked whether it answers (and, for NATS, has JetStream); nothing is created.
// NeedsPreflight: only a spec with a shared datastore has an environment to judge; any other
// spec is judged by Validate alone.
func (b *Backend) NeedsPreflight(spec backends.InstanceSpec) bool {
	o, err := ParseOptions(spec.Options)
	return err != nil || o.Datastore != nil
}

func (b *Backend) Preflight(ctx context.Context, spec backends.InstanceSpec) error {
	if err := b.Validate(spec); err != nil {
		return backends.InvalidSpec(err)
	}
	o, _ := ParseOptions(spec.Options)
	if o.Datastore == nil {
		return nil
	}
	s, err := b.server(o.Datastore.SecretRef, o.Datastore.key())
	if err != nil {
		return err
	}
	if err := goldenSupported(s, o.Datastore); err != nil {
		return err
	}
	return s.Ping(ctx)
}

// goldenSupported refuses goldenTemplates on a server that cannot copy a database (NATS).
func goldenSupported(s *datastore.Server, d *DatastoreOptions) error {
	if d.golden() && !s.SupportsTemplates() {
		return backends.InvalidSpec(fmt.Errorf("spec.backend.local.datastore.goldenTemplates: the %s datastore of secret %q cannot hold templates (kine's NATS buckets cannot be copied with their revisions); use PostgreSQL or MySQL/MariaDB, or no goldenTemplates", s.Driver(), d.SecretRef))
	}
	return nil
}

// provisionDatastore makes the instance's database and writes its DSN file. Called from
// Create before any process starts, and again by a retried Create that finds no DSN file.
func (in *instance) provisionDatastore(ctx context.Context, b *Backend) error {
	ds := in.rec.Datastore
	s, err := b.server(ds.SecretRef, ds.SecretKey)
	if err != nil {
		return err
	}
	var made datastore.Instance
	if ds.Template != "" {
		// Under the lock with which the last member's Delete drops the pool's templates.
		goldenMu.Lock()
		made, err = s.ProvisionFrom(ctx, in.rec.ID, ds.Template)
		goldenMu.Unlock()
	} else {
		made, err = s.Provision(ctx, in.rec.ID)
	}
	if err != nil {
		return err
	}
	tmp := in.path(dsnFile + ".tmp")
	if err := os.WriteFile(tmp, []byte(made.DSN.Reveal()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, in.path(dsnFile))
}

// dropDatastore drops the instance's database and role and verifies that they are gone.
func (b *Backend) dropDatastore(ctx context.Context, rec record) error {
	if rec.Datastore == nil {
		return nil
	}
	s, err := b.server(rec.Datastore.SecretRef, rec.Datastore.SecretKey)
	if err != nil {
		return fmt.Errorf("instance %s: cannot drop its database %s: %w", rec.ID, rec.Datastore.Name, err)
	}
	if err := s.Drop(ctx, rec.ID); err != nil {
		return err
	}
	if rec.Datastore.Template != "" {
		return b.dropGoldenIfLast(ctx, rec)
	}
	return nil
}

// readDSN returns the instance's own connection URL (kine's KINE_ENDPOINT).
func (in *instance) readDSN() (string, error) {
	data, err := os.ReadFile(in.path(dsnFile))
	if err != nil {
		return "", fmt.Errorf("instance %s: its datastore connection URL is missing: %w", in.rec.ID, err)
	}
	return string(data), nil
}

// scrub removes the instance's datastore password from a message that quotes a log (the
// message goes into the instance's status, and from there into workflow history).
func (in *instance) scrub(msg string) string {
	if in.rec.Datastore == nil {
		return msg
	}
	dsn, err := in.readDSN()
	if err != nil {
		return msg
	}
	return datastore.NewDSN(dsn).Scrub(msg)
}
