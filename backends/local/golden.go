package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/kunobi-ninja/kobe/backends"
)

// Golden templates on the local backend (backends.GoldenTemplater). Provision has a builder
// instance created, the pool's addons applied to it, then calls FreezeGoldenTemplate: the
// builder's processes stop and its database is copied into the template (datastore package),
// and the builder is deleted. A member created with spec.Golden gets a copy of the template as
// its database.
//
// Identity: kine's database holds the cluster's objects only; the CA, the serving certificate
// and the service-account signing keys of every local instance are files of its own directory,
// made by kobe for it. A member therefore trusts nothing of the builder's nor of another
// member's: the builder's keys are deleted with it, so a token that an addon left in a Secret
// of the template verifies nowhere, and each member's own credentials are refused by the others.
//
// The templates a host made are listed per pool in <state-dir>/local/golden/<pool>.json (with
// the secret that reaches their server), so that the pool's other generations and, when the
// pool's last member made from a template is deleted, every template of the pool are dropped
// exactly, never by a name prefix that could match another pool.

// goldenMu orders the template operations of this process: a copy from a template, the freeze
// of one and the drop of a pool's templates. goldenGone (under it) holds the members made from
// a template (by instance directory) whose databases are dropped but which are still being deleted: members deleted at
// once (a pool drained) must not each count the other as still there.
var (
	goldenMu   sync.Mutex
	goldenGone = map[string]bool{}
)

// goldenTemplateOf is the template a new instance's database is copied from ("": none).
func goldenTemplateOf(spec backends.InstanceSpec, d *DatastoreOptions) string {
	if spec.Golden == "" || d == nil || !d.golden() {
		return ""
	}
	return backends.GoldenTemplateID(spec)
}

// goldenEntry is one template in a pool's list.
type goldenEntry struct {
	ID        string `json:"id"`
	SecretRef string `json:"secretRef"`
	SecretKey string `json:"secretKey"`
}

func (b *Backend) goldenListPath(pool string) (string, error) {
	if !secretRefPattern.MatchString(pool) || len(pool) > 253 {
		return "", fmt.Errorf("pool name %q: not a DNS name", pool)
	}
	return filepath.Join(filepath.Dir(b.root), "golden", pool+".json"), nil
}

func (b *Backend) readGoldenList(pool string) ([]goldenEntry, error) {
	path, err := b.goldenListPath(pool)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []goldenEntry
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func (b *Backend) writeGoldenList(pool string, list []goldenEntry) error {
	path, err := b.goldenListPath(pool)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// goldenDatastore is the datastore section of a spec that asks for golden templates.
func goldenDatastore(spec backends.InstanceSpec) (*DatastoreOptions, error) {
	o, err := ParseOptions(spec.Options)
	if err != nil {
		return nil, backends.InvalidSpec(err)
	}
	if o.Datastore == nil || !o.Datastore.golden() {
		return nil, backends.InvalidSpec(errors.New("spec.backend.local.datastore.goldenTemplates: not set: the pool has no golden template"))
	}
	if spec.Golden == "" {
		return nil, errors.New("no golden template generation given")
	}
	return o.Datastore, nil
}

// GoldenTemplateReady implements backends.GoldenTemplater.
func (b *Backend) GoldenTemplateReady(ctx context.Context, spec backends.InstanceSpec) (bool, error) {
	d, err := goldenDatastore(spec)
	if err != nil {
		return false, err
	}
	s, err := b.server(d.SecretRef, d.key())
	if err != nil {
		return false, err
	}
	return s.TemplateReady(ctx, backends.GoldenTemplateID(spec))
}

// FreezeGoldenTemplate implements backends.GoldenTemplater: the builder sleeps (its kine lets
// go of the database), its database is copied into the template, and the pool's templates of
// other generations are dropped.
func (b *Backend) FreezeGoldenTemplate(ctx context.Context, builderID string, spec backends.InstanceSpec) error {
	d, err := goldenDatastore(spec)
	if err != nil {
		return err
	}
	s, err := b.server(d.SecretRef, d.key())
	if err != nil {
		return err
	}
	if err := b.Sleep(ctx, builderID); err != nil {
		return fmt.Errorf("stopping the golden builder %s: %w", builderID, err)
	}
	id := backends.GoldenTemplateID(spec)
	goldenMu.Lock()
	defer goldenMu.Unlock()
	list, err := b.readGoldenList(spec.Pool)
	if err != nil {
		return err
	}
	// Listed before it exists: a crash in the copy leaves an entry that the pool's drop finds.
	keep := []goldenEntry{{ID: id, SecretRef: d.SecretRef, SecretKey: d.key()}}
	if err := b.writeGoldenList(spec.Pool, append(keep, list...)); err != nil {
		return err
	}
	if err := s.FreezeTemplate(ctx, builderID, id); err != nil {
		return err
	}
	var dropErr error
	for _, e := range list {
		if e.ID == id {
			continue
		}
		if err := b.dropGolden(ctx, e); err != nil {
			keep = append(keep, e)
			dropErr = errors.Join(dropErr, err)
		}
	}
	return errors.Join(dropErr, b.writeGoldenList(spec.Pool, keep))
}

func (b *Backend) dropGolden(ctx context.Context, e goldenEntry) error {
	s, err := b.server(e.SecretRef, e.SecretKey)
	if err != nil {
		return fmt.Errorf("golden template %s: %w", e.ID, err)
	}
	return s.Drop(ctx, e.ID)
}

// dropGoldenIfLast drops every template of rec's pool when rec was its last member made from
// one on this host: the pool is going (or shrinking to nothing); its next member, if any,
// builds the template again.
func (b *Backend) dropGoldenIfLast(ctx context.Context, rec record) error {
	goldenMu.Lock()
	defer goldenMu.Unlock()
	goldenGone[filepath.Join(b.root, rec.ID)] = true
	b.mu.Lock()
	others := 0
	for id, in := range b.instances {
		if !goldenGone[filepath.Join(b.root, id)] && in.rec.Pool == rec.Pool && in.rec.Datastore != nil && in.rec.Datastore.Template != "" {
			others++
		}
	}
	for key := range goldenGone {
		if dir, id := filepath.Split(key); filepath.Clean(dir) == b.root {
			if _, ok := b.instances[id]; !ok {
				delete(goldenGone, key) // deleted: no longer among the instances to count
			}
		}
	}
	b.mu.Unlock()
	if others > 0 {
		return nil
	}
	list, err := b.readGoldenList(rec.Pool)
	if err != nil {
		return err
	}
	var keep []goldenEntry
	var dropErr error
	for _, e := range list {
		if err := b.dropGolden(ctx, e); err != nil {
			keep = append(keep, e)
			dropErr = errors.Join(dropErr, err)
		}
	}
	return errors.Join(dropErr, b.writeGoldenList(rec.Pool, keep))
}
