package poolspec

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
)

// Sleep (spec.sleep, kobe addition) is when a pool's leased clusters are put to sleep without
// anyone asking: after a stretch of inactivity, or on a cron schedule, and woken on another.
// A sleeping lease's TTL keeps running. Leases that match an Exclude entry are never slept by
// the policy (a person may still sleep them by hand).
type Sleep struct {
	// AfterInactivity sleeps a Bound lease that saw no activity for that long.
	AfterInactivity Duration `json:"afterInactivity,omitempty"`
	// Schedule and WakeSchedule are cron expressions (5 fields) read in Timezone: when the
	// pool's leased clusters are put to sleep, and when they are woken.
	Schedule     string `json:"schedule,omitempty"`
	WakeSchedule string `json:"wakeSchedule,omitempty"`
	// Timezone is an IANA zone name for the schedules (default UTC).
	Timezone string           `json:"timezone,omitempty"`
	Exclude  []SleepExclusion `json:"exclude,omitempty"`
}

// SleepExclusion picks leases the sleep policy leaves alone. Every field that is set must
// match; an entry with no field is refused.
type SleepExclusion struct {
	// Owner is a glob (path.Match) on the lease's owner (its principal).
	Owner string `json:"owner,omitempty"`
	// Alias is a glob on the lease's alias.
	Alias string `json:"alias,omitempty"`
	// Metadata entries must all be present on the lease with exactly these values.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// SleepPolicy is spec.sleep resolved.
type SleepPolicy struct {
	AfterInactivity time.Duration    `json:",omitempty"`
	Schedule        string           `json:",omitempty"`
	WakeSchedule    string           `json:",omitempty"`
	Timezone        string           `json:",omitempty"`
	Exclude         []SleepExclusion `json:",omitempty"`
}

// Excludes says whether the policy leaves a lease alone.
func (p *SleepPolicy) Excludes(owner, alias string, metadata map[string]string) bool {
	if p == nil {
		return true
	}
	for _, e := range p.Exclude {
		if e.matches(owner, alias, metadata) {
			return true
		}
	}
	return false
}

func (e SleepExclusion) matches(owner, alias string, metadata map[string]string) bool {
	if e.Owner != "" {
		if ok, _ := path.Match(e.Owner, owner); !ok {
			return false
		}
	}
	if e.Alias != "" {
		if ok, _ := path.Match(e.Alias, alias); !ok {
			return false
		}
	}
	for k, v := range e.Metadata {
		if got, ok := metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// sleep resolves spec.sleep. The policy needs a backend that can sleep its members.
func (pol *Policy) sleep(s *Sleep, refuse bool) error {
	if s == nil {
		return nil
	}
	if f, err := backends.Resolve(pol.Backend); refuse && err == nil && !f.Traits.Sleep {
		return fmt.Errorf("spec.sleep is not supported by the %s backend (it cannot sleep its members)", pol.Backend)
	}
	sp := &SleepPolicy{}
	for i, e := range s.Exclude {
		field := fmt.Sprintf("spec.sleep.exclude[%d]", i)
		if e.Owner == "" && e.Alias == "" && len(e.Metadata) == 0 {
			return fmt.Errorf("%s: give at least one of owner, alias or metadata", field)
		}
		for name, glob := range map[string]string{"owner": e.Owner, "alias": e.Alias} {
			if _, err := path.Match(glob, ""); err != nil {
				return fmt.Errorf("%s.%s: %q is not a valid glob: %v", field, name, glob, err)
			}
		}
	}
	sp.Exclude = s.Exclude
	after, err := afterInactivity(s.AfterInactivity)
	if err != nil {
		return err
	}
	sp.AfterInactivity = after
	if err := sleepSchedules(s, sp); err != nil {
		return err
	}
	if len(sp.Exclude) > 0 && sp.AfterInactivity == 0 && s.Schedule == "" && s.WakeSchedule == "" {
		return errors.New("spec.sleep: exclude alone does nothing; give afterInactivity, schedule or wakeSchedule")
	}
	pol.Sleep = sp
	return nil
}

// MinAfterInactivity is the shortest spec.sleep.afterInactivity: a lease's activity is checked
// about once per afterInactivity (an activity reading its backend's record), so a shorter one
// would cost more checks than the sleeping saves.
const MinAfterInactivity = 5 * time.Second

// afterInactivity resolves spec.sleep.afterInactivity (zero: not set).
func afterInactivity(raw Duration) (time.Duration, error) {
	if raw == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(string(raw))
	if err != nil || d < MinAfterInactivity {
		return 0, fmt.Errorf("spec.sleep.afterInactivity: %q is not a duration of at least %s (e.g. 30m)", raw, MinAfterInactivity)
	}
	return d, nil
}

// InactivityFor is how long a new lease of this owner, alias and metadata may be inactive
// before the policy sleeps it: AfterInactivity, or zero when it is not set or excludes the lease.
func (p *SleepPolicy) InactivityFor(owner, alias string, metadata map[string]string) time.Duration {
	if p == nil || p.AfterInactivity == 0 || p.Excludes(owner, alias, metadata) {
		return 0
	}
	return p.AfterInactivity
}
