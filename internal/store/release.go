package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
)

// ReleaseStamp is the release of kobe that last started on a store (kobe_release).
type ReleaseStamp struct {
	// Created is the release that stamped the store first (the one that created it, or the
	// first one from v0.1.0 on that started on it).
	Created string
	// Release is the release that started on it last, at OpenedAt.
	Release  string
	OpenedAt time.Time
}

func (s *sqlStore) Release(ctx context.Context) (ReleaseStamp, error) {
	var r ReleaseStamp
	var at string
	err := s.queryRow(ctx, `SELECT created, release, opened_at FROM kobe_release WHERE id = 1`).Scan(&r.Created, &r.Release, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return ReleaseStamp{}, ErrNotFound
	}
	if err != nil {
		return ReleaseStamp{}, err
	}
	r.OpenedAt, _ = time.Parse(time.RFC3339, at)
	return r, nil
}

func (s *sqlStore) StampRelease(ctx context.Context, release string, at time.Time) error {
	_, err := s.exec(ctx, `INSERT INTO kobe_release (id, created, release, opened_at) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET release = excluded.release, opened_at = excluded.opened_at`,
		release, release, at.UTC().Format(time.RFC3339))
	return err
}

// Live is what a store holds that has workflows running in Temporal: leases still Pending or
// Bound, pools (each an entity workflow) and clusters (instances, each provisioned or torn down
// by a workflow, and held by its pool's).
type Live struct {
	Leases, Pools, Instances int
}

// Empty says whether nothing is live.
func (l Live) Empty() bool { return l.Leases == 0 && l.Pools == 0 && l.Instances == 0 }

func (l Live) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{l.Leases, "lease (Pending or Bound)"}, {l.Pools, "pool"}, {l.Instances, "cluster"}} {
		switch {
		case c.n == 1:
			parts = append(parts, "1 "+c.what)
		case c.n > 1:
			what := c.what
			if i := strings.Index(what, " "); i > 0 {
				what = what[:i] + "s" + what[i:]
			} else {
				what += "s"
			}
			parts = append(parts, fmt.Sprintf("%d %s", c.n, what))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// LiveState counts what s holds that has workflows running.
func LiveState(ctx context.Context, s Store) (Live, error) {
	leases, err := s.ListLeases(ctx, LeaseFilter{Phases: api.ActiveLeasePhases})
	if err != nil {
		return Live{}, err
	}
	pools, err := s.ListPools(ctx)
	if err != nil {
		return Live{}, err
	}
	instances, err := s.ListInstances(ctx, InstanceFilter{})
	if err != nil {
		return Live{}, err
	}
	return Live{Leases: len(leases), Pools: len(pools), Instances: len(instances)}, nil
}

// OldReleaseError refuses a store last started by a release before the oldest one this kobe
// supports (Last "": before v0.1.0, which introduced the stamp) that still holds live state:
// the workflows of that state may have taken paths this kobe's code no longer has.
type OldReleaseError struct {
	// Last is the release that started on the store last ("" before v0.1.0).
	Last string
	// Oldest is the oldest release whose state this kobe runs; Release is this kobe's.
	Oldest, Release string
	Live            Live
	// Subject names what is refused ("" is "this store"); Drain says how to drain it (""
	// only says to, with the kobe that ran it). The caller that knows them sets them.
	Subject, Drain string
}

func (e *OldReleaseError) Error() string {
	subject := e.Subject
	if subject == "" {
		subject = "this store"
	}
	last := "a kobe before " + e.Oldest
	if e.Last != "" {
		last = "kobe " + e.Last + " (this kobe runs the state of " + e.Oldest + " and later)"
	}
	msg := fmt.Sprintf("%s was last run by %s and still holds %s, whose workflows kobe %s does not replay: "+
		"drain it first with the kobe that ran it", subject, last, e.Live, e.Release)
	if e.Drain != "" {
		msg += " (" + e.Drain + ")"
	}
	return msg + ", then start kobe " + e.Release + " again"
}

// CheckRelease accepts s for release (and stamps it) unless it was last started by a release
// before oldest — or before v0.1.0, when there is no stamp — and still holds live state, which
// it refuses with an *OldReleaseError. A new store, or an old one drained of everything, is
// accepted.
func CheckRelease(ctx context.Context, s Store, release, oldest string, now time.Time) error {
	stamp, err := s.Release(ctx)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("reading the store's release: %w", err)
	}
	if stamp.Release == "" || CompareReleases(stamp.Release, oldest) < 0 {
		live, err := LiveState(ctx, s)
		if err != nil {
			return fmt.Errorf("reading what the store holds: %w", err)
		}
		if !live.Empty() {
			return &OldReleaseError{Last: stamp.Release, Oldest: oldest, Release: release, Live: live}
		}
	}
	if err := s.StampRelease(ctx, release, now); err != nil {
		return fmt.Errorf("recording the store's release: %w", err)
	}
	return nil
}

// CompareReleases compares two releases ("v0.1.0") by their major, minor and patch numbers
// only: a pre-release or build suffix ("v0.1.0-dev", "v0.1.0-3-gabcdef") counts as its release.
// A release that does not parse compares equal to any other.
func CompareReleases(a, b string) int {
	pa, oka := releaseCore(a)
	pb, okb := releaseCore(b)
	if !oka || !okb {
		return 0
	}
	for i := range pa {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func releaseCore(r string) ([3]int, bool) {
	var out [3]int
	r, ok := strings.CutPrefix(r, "v")
	if !ok {
		return out, false
	}
	if i := strings.IndexAny(r, "-+"); i >= 0 {
		r = r[:i]
	}
	parts := strings.Split(r, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
