package store

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// DSN is a parsed --store value (kobe's own store, not Temporal's).
type DSN struct {
	Driver string // "sqlite" or "postgres"
	// Path is the SQLite file, or ":memory:".
	Path string
	// URL is the PostgreSQL connection URL, as given.
	URL string
}

// ParseDSN parses a --store value: it accepts postgres://…, postgresql://…, sqlite:///abs/path, sqlite://rel/path and sqlite://:memory:.
func ParseDSN(dsn string) (DSN, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return DSN{}, fmt.Errorf("--store: not a valid postgres URL: %v", RedactDSNError(err, dsn))
		}
		if u.Host == "" {
			return DSN{}, fmt.Errorf("--store %s: missing host", RedactDSN(dsn))
		}
		return DSN{Driver: "postgres", URL: dsn}, nil
	case strings.HasPrefix(dsn, "sqlite://"):
		p := strings.TrimPrefix(dsn, "sqlite://")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			return DSN{}, fmt.Errorf("--store %s: sqlite DSN takes no options", dsn)
		}
		if p == "" {
			return DSN{}, fmt.Errorf("--store %s: missing file path (sqlite:///path/kobe.db)", dsn)
		}
		return DSN{Driver: "sqlite", Path: p}, nil
	default:
		return DSN{}, fmt.Errorf("--store %s: unsupported scheme; use postgres://… or sqlite:///path", RedactDSN(dsn))
	}
}

// passwordInURL matches the password part of scheme://user:password@host.
var passwordInURL = regexp.MustCompile(`(://[^:/@]*:)([^@]*)@`)

// RedactDSN hides the password of a URL-shaped DSN so that it can appear in logs and errors.
func RedactDSN(dsn string) string {
	return passwordInURL.ReplaceAllString(dsn, "${1}xxxxx@")
}

// RedactDSNError removes the DSN's password from an error message that may quote it.
func RedactDSNError(err error, dsn string) string {
	msg := err.Error()
	if m := passwordInURL.FindStringSubmatch(dsn); m != nil && m[2] != "" {
		msg = strings.ReplaceAll(msg, m[2], "xxxxx")
		msg = strings.ReplaceAll(msg, url.QueryEscape(m[2]), "xxxxx")
	}
	return msg
}
