// Package datastore gives each cluster instance its own database on a shared datastore server
// that an operator names by an admin connection URL: PostgreSQL (postgres://), MySQL or
// MariaDB (mysql://) or NATS with JetStream (nats://). Provision creates the instance's
// database and role (its own bucket on NATS) and returns the instance's own connection URL in
// the form kine and k3s's --datastore-endpoint accept; Drop removes them and verifies that
// nothing is left; Leftovers lists what remains by instance id prefix.
//
// Names on the server are derived from the instance id (a DNS label, checked here), never
// from other input: "kobe_" + the id with '-' replaced by '_' (ids hold no '_', so distinct ids
// give distinct names), cut to the server's limit with a hash of the id when too long.
//
// Connection URLs carry passwords: they are held in a DSN, which prints and marshals redacted,
// and every error of this package has the passwords it knows of replaced by "xxxxx".
package datastore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// DefaultSecretKey is the key of the connection URL in the operator's Secret when
// spec.backend.datastore.secretKey is not given (upstream's default).
const DefaultSecretKey = "connection-url"

// Driver is the kind of a datastore server.
type Driver string

// The drivers kine speaks and this package provisions.
const (
	Postgres Driver = "postgres"
	MySQL    Driver = "mysql"
	NATS     Driver = "nats"
)

// NamePrefix starts the name of every database, role, user and bucket this package creates.
const NamePrefix = "kobe_"

// Name length limits of the servers: PostgreSQL identifiers 63 bytes; MySQL/MariaDB user names
// 32 (databases 64: the user's limit is used for both, so that they have the same name); NATS
// bucket names have no documented limit, 63 keeps them readable beside the others.
const (
	postgresNameLimit = 63
	mysqlNameLimit    = 32
	natsNameLimit     = 63
)

// DSN is a connection URL with credentials. It prints, formats and marshals as "<redacted>"
// plus the URL without its password, so that it can be passed around without landing in a
// log or in workflow history; Reveal gives the URL itself to whoever must connect (kine).
type DSN struct {
	value    string
	redacted string
}

// NewDSN wraps a connection URL.
func NewDSN(value string) DSN { return DSN{value: value, redacted: Redact(value)} }

// Reveal returns the connection URL, password included.
func (d DSN) Reveal() string { return d.value }

// IsZero reports whether no URL is held.
func (d DSN) IsZero() bool { return d.value == "" }

// String implements fmt.Stringer: the URL with its password replaced.
func (d DSN) String() string { return d.redacted }

// GoString implements fmt.GoStringer (%#v).
func (d DSN) GoString() string { return "datastore.DSN(" + d.redacted + ")" }

// MarshalJSON implements json.Marshaler: the redacted URL, never the password.
func (d DSN) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", d.redacted)), nil }

// MarshalText implements encoding.TextMarshaler, redacted as MarshalJSON.
func (d DSN) MarshalText() ([]byte, error) { return []byte(d.redacted), nil }

// Scrub returns s with this DSN's password (or token) replaced by "xxxxx": for text that may
// quote it, such as the last lines of a kine log.
func (d DSN) Scrub(s string) string {
	for _, secret := range secretsOf(d.value) {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			s = strings.ReplaceAll(s, form, "xxxxx")
		}
	}
	return s
}

// LogValue implements slog.LogValuer.
func (d DSN) LogValue() slog.Value { return slog.StringValue(d.redacted) }

// passwordInURL matches the password of scheme://user:password@host and of kine's MySQL form
// mysql://user:password@tcp(host:port)/db. A user without a password (NATS token) is kept.
var passwordInURL = regexp.MustCompile(`(://[^:/@]*:)([^@]*)@`)

// tokenInURL matches a NATS token (nats://token@host), a secret too.
var tokenInURL = regexp.MustCompile(`^(nats://)([^:/@]+)@`)

// Redact hides the password (or NATS token) of a connection URL.
func Redact(s string) string {
	s = passwordInURL.ReplaceAllString(s, "${1}xxxxx@")
	return tokenInURL.ReplaceAllString(s, "${1}xxxxx@")
}

// secretsOf returns the secrets a URL holds (password or token), for scrubbing errors.
func secretsOf(s string) []string {
	var out []string
	if m := passwordInURL.FindStringSubmatch(s); m != nil && m[2] != "" {
		out = append(out, m[2])
	}
	if m := tokenInURL.FindStringSubmatch(s); m != nil && m[2] != "" {
		out = append(out, m[2])
	}
	return out
}

// scrub returns err with every given secret (and its URL-escaped forms) replaced, so that no
// driver's error message can carry a password out of this package.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			if strings.Contains(msg, form) {
				msg = strings.ReplaceAll(msg, form, "xxxxx")
				changed = true
			}
		}
	}
	if !changed {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubbedError keeps errors.Is working on the original while printing the scrubbed text.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// Instance is what Provision made for one instance.
type Instance struct {
	Driver Driver `json:"driver"`
	// Name is the instance's database and role (MySQL: database and user; NATS: bucket).
	Name string `json:"name"`
	// DSN is the instance's own connection URL, for kine's --endpoint (KINE_ENDPOINT) and
	// k3s's --datastore-endpoint. Secret: it marshals redacted.
	DSN DSN `json:"dsn"`
}

// Server is a shared datastore server, reached with the operator's admin URL.
type Server struct {
	driver Driver
	admin  DSN
	// secrets are the admin URL's password or token, scrubbed from every error.
	secrets []string
	impl    driverImpl
}

// driverImpl is what each driver does; names are already derived and checked.
type driverImpl interface {
	ping(ctx context.Context) error
	provision(ctx context.Context, name, password string) (DSN, error)
	drop(ctx context.Context, name string) error
	// objects lists what exists on the server whose name starts with prefix ("database x").
	objects(ctx context.Context, prefix string) ([]string, error)
	nameLimit() int
}

// ErrUnsupportedScheme is returned by Parse for a URL that is not postgres://, postgresql://,
// mysql:// or nats://.
var ErrUnsupportedScheme = errors.New("unsupported datastore scheme")

// Parse reads an operator's admin connection URL. It does not connect (see Ping).
//
//	postgres://user:pass@host:5432/postgres?sslmode=disable   (postgresql:// too)
//	mysql://user:pass@tcp(host:3306)/                         (kine's form; mysql://user:pass@host:3306/ too)
//	nats://[user:pass@|token@]host:4222                      (replicas, revHistory, slowMethod, credsFile passed on)
func Parse(adminURL string) (*Server, error) {
	adminURL = strings.TrimSpace(adminURL)
	s := &Server{admin: NewDSN(adminURL), secrets: secretsOf(adminURL)}
	scheme, _, ok := strings.Cut(adminURL, "://")
	if !ok {
		return nil, fmt.Errorf("datastore URL %q: %w: expected postgres://, mysql:// or nats://", Redact(adminURL), ErrUnsupportedScheme)
	}
	var err error
	switch scheme {
	case "postgres", "postgresql":
		s.driver = Postgres
		s.impl, err = newPostgres(adminURL)
	case "mysql":
		s.driver = MySQL
		s.impl, err = newMySQL(adminURL)
	case "nats":
		s.driver = NATS
		s.impl, err = newNATS(adminURL)
	case "mariadb":
		return nil, fmt.Errorf("datastore URL %s: %w %q: MariaDB is reached with mysql:// (kine's MySQL driver)", Redact(adminURL), ErrUnsupportedScheme, scheme)
	default:
		return nil, fmt.Errorf("datastore URL %s: %w %q: expected postgres://, mysql:// or nats://", Redact(adminURL), ErrUnsupportedScheme, scheme)
	}
	if err != nil {
		return nil, scrub(fmt.Errorf("datastore URL %s: %w", Redact(adminURL), err), s.secrets...)
	}
	return s, nil
}

// Driver returns the server's driver.
func (s *Server) Driver() Driver { return s.driver }

// String is the admin URL, redacted.
func (s *Server) String() string { return s.admin.String() }

// Ping connects with the admin URL and checks that the server can provision (NATS: JetStream
// is enabled for the account).
func (s *Server) Ping(ctx context.Context) error {
	if err := s.impl.ping(ctx); err != nil {
		return s.fail("cannot reach the %s datastore %s: %w", s.driver, s, err)
	}
	return nil
}

// Name returns the name an instance's database, role and bucket get on this server.
func (s *Server) Name(instanceID string) (string, error) {
	return NameFor(instanceID, s.impl.nameLimit())
}

// Provision creates the instance's own database and role (NATS: checks JetStream; the bucket
// is created by kine with the configuration it wants, on its first start) and returns its
// DSN. It is idempotent: called again it creates nothing twice and sets a fresh password, so
// the DSN of the last call is the one that works (a NATS DSN does not change).
func (s *Server) Provision(ctx context.Context, instanceID string) (Instance, error) {
	name, err := s.Name(instanceID)
	if err != nil {
		return Instance{}, err
	}
	password, err := newPassword()
	if err != nil {
		return Instance{}, err
	}
	dsn, err := s.impl.provision(ctx, name, password)
	if err != nil {
		return Instance{}, s.fail("provisioning %s on the %s datastore %s: %w", name, s.driver, s, scrub(err, password))
	}
	return Instance{Driver: s.driver, Name: name, DSN: dsn}, nil
}

// Drop removes the instance's database and role (NATS: its bucket), closing their sessions
// first, and verifies that none of them remains. Dropping what does not exist succeeds.
func (s *Server) Drop(ctx context.Context, instanceID string) error {
	name, err := s.Name(instanceID)
	if err != nil {
		return err
	}
	if err := s.impl.drop(ctx, name); err != nil {
		return s.fail("dropping %s on the %s datastore %s: %w", name, s.driver, s, err)
	}
	left, err := s.impl.objects(ctx, name)
	if err != nil {
		return s.fail("checking that %s is gone from the %s datastore %s: %w", name, s.driver, s, err)
	}
	var exact []string
	for _, o := range left {
		if _, n, _ := strings.Cut(o, " "); n == name {
			exact = append(exact, o)
		}
	}
	if len(exact) > 0 {
		return fmt.Errorf("dropping %s on the %s datastore %s: still there: %s", name, s.driver, s, strings.Join(exact, ", "))
	}
	return nil
}

// Leftovers lists the databases, roles, users and buckets of instances whose id starts with
// idPrefix, as "database kobe_x", "role kobe_x", "user kobe_x", "bucket kobe_x". An empty
// prefix lists everything this package made. A prefix longer than the part of a name kept
// before its hash is cut to it, so it may list more than asked, never less.
func (s *Server) Leftovers(ctx context.Context, idPrefix string) ([]string, error) {
	if idPrefix != "" && !prefixPattern.MatchString(idPrefix) {
		return nil, fmt.Errorf("instance id prefix %q: lowercase letters, digits and '-' only", idPrefix)
	}
	prefix := NamePrefix + strings.ReplaceAll(idPrefix, "-", "_")
	if keep := s.impl.nameLimit() - hashLen - 1; len(prefix) > keep {
		prefix = prefix[:keep]
	}
	out, err := s.impl.objects(ctx, prefix)
	if err != nil {
		return nil, s.fail("listing %s* on the %s datastore %s: %w", prefix, s.driver, s, err)
	}
	return out, nil
}

func (s *Server) fail(format string, args ...any) error {
	return scrub(fmt.Errorf(format, args...), s.secrets...)
}

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	prefixPattern = regexp.MustCompile(`^[-a-z0-9]+$`)
)

// hashLen is the number of hex digits of the id's hash that end a name cut to its limit.
const hashLen = 10

// NameFor derives the server-side name of an instance: NamePrefix + the id with '-' as '_',
// or, when that is longer than limit, its first limit-11 characters, '_' and 10 hex digits of
// the id's SHA-256. The id must be a DNS label (at most 63 characters).
func NameFor(instanceID string, limit int) (string, error) {
	if !idPattern.MatchString(instanceID) || len(instanceID) > 63 {
		return "", fmt.Errorf("instance id %q: must be a DNS label (lowercase letters, digits, '-'; at most 63)", instanceID)
	}
	name := NamePrefix + strings.ReplaceAll(instanceID, "-", "_")
	if len(name) <= limit {
		return name, nil
	}
	sum := sha256.Sum256([]byte(instanceID))
	return name[:limit-hashLen-1] + "_" + hex.EncodeToString(sum[:])[:hashLen], nil
}

// newPassword is 32 random hex characters (128 bits): no character any URL or SQL quoting
// would need to escape.
func newPassword() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// safeName is the last guard before a name is put into SQL: what NameFor returns, only.
var safeName = regexp.MustCompile(`^kobe_[a-z0-9_]+$`)

func checkName(name string) error {
	if !safeName.MatchString(name) {
		return fmt.Errorf("refusing unsafe name %q", name)
	}
	return nil
}
