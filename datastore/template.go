package datastore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Golden templates: a pool's members can start from a copy of one prepared database (its
// template) instead of an empty one. The template is frozen from a builder instance's database
// once the builder has what every member should have (the pool's addons), and each member's
// database is then a copy of it with the member's own role. A template is named like an
// instance (NameFor of its id) and dropped like one (Drop); Leftovers lists it.
//
// PostgreSQL copies with CREATE DATABASE … TEMPLATE (a file-level copy); MySQL/MariaDB, which
// have no such statement, copy table by table (CREATE TABLE … LIKE, INSERT … SELECT). NATS has
// no copy of a key-value bucket that keeps kine's revisions: it is refused.
//
// Keys of kine's table can be left out of a template (FreezeTemplate's without): k3s keeps its
// servers' bootstrap data (CA keys, service-account key, token file) under /bootstrap/ in the
// datastore, which no member may inherit from the builder.

// ErrTemplatesUnsupported is returned for a driver that cannot copy a database (NATS).
var ErrTemplatesUnsupported = errors.New("golden templates are not supported on this datastore")

// templater is what a driver that supports golden templates does; names are derived and checked.
type templater interface {
	// freeze makes template a copy of source's database (whose sessions it ends first),
	// without the kine rows of the keys in without (see keyMatch); it does nothing when
	// template is complete already (templateComplete).
	freeze(ctx context.Context, source, template string, without []string) error
	// keys lists the names of kine's rows in database that start with prefix (distinct, sorted).
	keys(ctx context.Context, database, prefix string) ([]string, error)
	// templateComplete reports whether template exists and was frozen to the end.
	templateComplete(ctx context.Context, template string) (bool, error)
	// provisionFrom is provision with the new database a copy of template's, owned by name.
	provisionFrom(ctx context.Context, name, password, template string) (DSN, error)
}

// SupportsTemplates reports whether the server's driver can copy a database (not NATS).
func (s *Server) SupportsTemplates() bool {
	_, ok := s.impl.(templater)
	return ok
}

func (s *Server) templater() (templater, error) {
	t, ok := s.impl.(templater)
	if !ok {
		return nil, fmt.Errorf("%w: the %s driver cannot copy a database with kine's revisions (use PostgreSQL or MySQL/MariaDB, or no goldenTemplates)", ErrTemplatesUnsupported, s.driver)
	}
	return t, nil
}

// FreezeTemplate makes templateID's database a copy of sourceID's: the source instance must be
// stopped (its sessions are ended). without are keys of kine's table the template does not
// get: a key, or every key under a prefix that ends with '/' (e.g. "/bootstrap/"); the template
// is complete only once they are gone. Idempotent: a complete template is kept as it is; one
// left half-made by a crash is made again.
func (s *Server) FreezeTemplate(ctx context.Context, sourceID, templateID string, without ...string) error {
	t, err := s.templater()
	if err != nil {
		return err
	}
	for _, k := range without {
		if !kineKey.MatchString(k) {
			return fmt.Errorf("FreezeTemplate: %q is not a kine key (/letters, digits, '.', '-', '/')", k)
		}
	}
	source, err := s.Name(sourceID)
	if err != nil {
		return err
	}
	template, err := s.Name(templateID)
	if err != nil {
		return err
	}
	if err := t.freeze(ctx, source, template, without); err != nil {
		return s.fail("freezing %s as the template %s on the %s datastore %s: %w", source, template, s.driver, s, err)
	}
	return nil
}

// TemplateReady reports whether templateID's template is complete (FreezeTemplate ended).
func (s *Server) TemplateReady(ctx context.Context, templateID string) (bool, error) {
	t, err := s.templater()
	if err != nil {
		return false, err
	}
	template, err := s.Name(templateID)
	if err != nil {
		return false, err
	}
	ok, err := t.templateComplete(ctx, template)
	if err != nil {
		return false, s.fail("looking up the template %s on the %s datastore %s: %w", template, s.driver, s, err)
	}
	return ok, nil
}

// ProvisionFrom is Provision with the instance's database a copy of templateID's template
// (complete: see TemplateReady), owned by the instance's own role. Like Provision it is
// idempotent until the instance's kine first starts.
func (s *Server) ProvisionFrom(ctx context.Context, instanceID, templateID string) (Instance, error) {
	t, err := s.templater()
	if err != nil {
		return Instance{}, err
	}
	name, err := s.Name(instanceID)
	if err != nil {
		return Instance{}, err
	}
	template, err := s.Name(templateID)
	if err != nil {
		return Instance{}, err
	}
	ok, err := t.templateComplete(ctx, template)
	if err != nil {
		return Instance{}, s.fail("looking up the template %s on the %s datastore %s: %w", template, s.driver, s, err)
	}
	if !ok {
		return Instance{}, fmt.Errorf("the template %s does not exist (or is not complete) on the %s datastore %s", template, s.driver, s)
	}
	password, err := newPassword()
	if err != nil {
		return Instance{}, err
	}
	dsn, err := t.provisionFrom(ctx, name, password, template)
	if err != nil {
		return Instance{}, s.fail("provisioning %s from the template %s on the %s datastore %s: %w", name, template, s.driver, s, scrub(err, password))
	}
	return Instance{Driver: s.driver, Name: name, DSN: dsn}, nil
}

// kineKey is what a key left out of a template may be: no quote, and none of LIKE's wildcards
// ('%', '_'), so that it goes into a pattern as it is.
var kineKey = regexp.MustCompile(`^/[A-Za-z0-9./-]*$`)

// keyMatch is the SQL condition on kine's name column for a key left out of a template, with
// its one argument: the key itself, or (ending with '/') everything under it. TemplateLeavesOut
// is the same rule in Go.
func keyMatch(key string) (string, string) {
	if strings.HasSuffix(key, "/") {
		return "name LIKE ?", key + "%"
	}
	return "name = ?", key
}

// TemplateLeavesOut reports whether FreezeTemplate(…, without...) leaves key out of the
// template: key is one of without, or under one that ends with '/' (keyMatch's rule, which
// TestFreezeTemplateWithoutKeys checks against the SQL). A backend's choice of keys is tested
// with it without a database.
func TemplateLeavesOut(key string, without ...string) bool {
	for _, w := range without {
		if key == w || (strings.HasSuffix(w, "/") && strings.HasPrefix(key, w)) {
			return true
		}
	}
	return false
}

// TemplateKeys lists the kine keys starting with prefix held by instanceID's database (or a
// template's, named by its id): what a template was frozen without can be checked with it.
func (s *Server) TemplateKeys(ctx context.Context, instanceID, prefix string) ([]string, error) {
	t, err := s.templater()
	if err != nil {
		return nil, err
	}
	if !kineKey.MatchString(prefix) {
		return nil, fmt.Errorf("TemplateKeys: %q is not a kine key prefix", prefix)
	}
	name, err := s.Name(instanceID)
	if err != nil {
		return nil, err
	}
	keys, err := t.keys(ctx, name, prefix)
	if err != nil {
		return nil, s.fail("listing the keys %s* of %s on the %s datastore %s: %w", prefix, name, s.driver, s, err)
	}
	return keys, nil
}
