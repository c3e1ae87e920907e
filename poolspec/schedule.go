package poolspec

import (
	"errors"
	"fmt"
	"strings"
	"time"
	// kobe reads zones from its own zoneinfo.zip (LoadZone). This keeps Go's tzdata in the
	// binary for what reads zones with time.LoadLocation, e.g. the Temporal server that kobe
	// dev embeds, which fires the schedules, on a host without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	"github.com/kunobi-ninja/kobe/internal/jsonduration"
)

// The timed parts of a pool: spec.sleep.schedule / wakeSchedule (when leased clusters are put
// to sleep and woken) and spec.scaling.schedule (windows with another warm target). They become
// Temporal Schedules (pool/schedules.go), so Temporal decides when they fire; what is checked
// here is that Temporal reads the expressions the way a reader of the manifest does.

// cronParser reads the five standard fields (minute hour day-of-month month day-of-week),
// nothing else: no seconds, no descriptors (@daily), no time zone prefix (spec.*.timezone says it).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// starBit is how robfig/cron marks a field written as "*".
const starBit = 1 << 63

// parseCron checks a cron expression of field. Beyond its syntax: only digits and * , - /
// (no names, no ?, no L or W), and not both day-of-month and day-of-week restricted, because
// cron(8) then fires on either day while Temporal's calendar fires only on days matching both.
func parseCron(field, expr string) (*cron.SpecSchedule, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("%s: an empty cron expression", field)
	}
	if i := strings.IndexFunc(expr, func(r rune) bool {
		return !(r >= '0' && r <= '9') && !strings.ContainsRune("*,-/ ", r)
	}); i >= 0 {
		return nil, fmt.Errorf("%s: %q is not a cron expression kobe reads: only digits and * , - / in five fields (minute hour day-of-month month day-of-week), found %q", field, expr, expr[i])
	}
	if n := len(strings.Fields(expr)); n != 5 {
		return nil, fmt.Errorf("%s: %q has %d fields; give five (minute hour day-of-month month day-of-week)", field, expr, n)
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %q does not parse: %v", field, expr, err)
	}
	spec := s.(*cron.SpecSchedule)
	if spec.Dom&starBit == 0 && spec.Dow&starBit == 0 {
		return nil, fmt.Errorf("%s: %q restricts both day-of-month and day-of-week, which cron and Temporal read differently (either day vs both); restrict one of them", field, expr)
	}
	return spec, nil
}

// loadZone checks an IANA zone name ("" is UTC).
func loadZone(field, name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("%s: give an IANA zone name such as Europe/Berlin, not Local (the workers' zone)", field)
	}
	loc, err := LoadZone(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a known time zone (an IANA name such as Europe/Berlin): %v", field, name, err)
	}
	return loc, nil
}

// sleepSchedules checks spec.sleep's schedule, wakeSchedule and timezone into sp. Either
// schedule may come alone: a pool may only put its clusters to sleep at night (they are
// woken by hand), or only wake in the morning those slept by hand or by inactivity.
func sleepSchedules(s *Sleep, sp *SleepPolicy) error {
	if s.Timezone != "" && s.Schedule == "" && s.WakeSchedule == "" {
		return errors.New("spec.sleep.timezone: set without schedule or wakeSchedule, it does nothing")
	}
	if _, err := loadZone("spec.sleep.timezone", s.Timezone); err != nil {
		return err
	}
	for _, c := range []struct{ field, expr string }{{"spec.sleep.schedule", s.Schedule}, {"spec.sleep.wakeSchedule", s.WakeSchedule}} {
		if c.expr == "" {
			continue
		}
		if _, err := parseCron(c.field, c.expr); err != nil {
			return err
		}
	}
	if s.Schedule != "" && s.Schedule == s.WakeSchedule {
		return errors.New("spec.sleep.wakeSchedule: the same as schedule; the clusters would be put to sleep and woken at once")
	}
	sp.Schedule, sp.WakeSchedule, sp.Timezone = s.Schedule, s.WakeSchedule, s.Timezone
	return nil
}

// WarmWindow (spec.scaling.schedule[], kobe addition) is a stretch of time in which the pool
// keeps another warm target: it starts whenever Cron fires (read in Timezone) and lasts
// Duration of wall-clock time, so a 12h window from 20:00 ends at 08:00 also on the nights
// the clocks change (it then lasts 11 or 13 hours).
type WarmWindow struct {
	Cron     string   `json:"cron"`
	Duration Duration `json:"duration"`
	MinReady *int     `json:"minReady"`
	// Timezone is an IANA zone name (default UTC); every window of a pool names the same one.
	Timezone string `json:"timezone,omitempty"`
}

// WarmWindowPolicy is a WarmWindow resolved.
type WarmWindowPolicy struct {
	Cron     string
	Duration time.Duration
	MinReady int
	Timezone string `json:",omitempty"`
}

// Bounds of a warm window.
const (
	MinWarmWindow = time.Minute
	MaxWarmWindow = 7 * 24 * time.Hour
)

const minutesPerWeek = 7 * 24 * 60

// warmWindows checks spec.scaling.schedule into pol.WarmWindows. The windows' crons must repeat
// every week (day-of-month and month "*"): then whether two windows overlap, or one overlaps
// its own next start, is decided exactly on the 10080 minutes of a week of wall-clock time,
// which is what Duration counts. Overlapping windows are refused: which minReady held would
// depend on the order the schedules fired in.
func (pol *Policy) warmWindows(ws []WarmWindow) error {
	if len(ws) == 0 {
		return nil
	}
	if len(ws) > 20 {
		return fmt.Errorf("spec.scaling.schedule: %d windows; at most 20", len(ws))
	}
	// owner[m] is 1 + the index of the window covering minute m of the week (Sunday 00:00 = 0);
	// start[m] is that window's start minute.
	owner := make([]int, minutesPerWeek)
	start := make([]int, minutesPerWeek)
	out := make([]WarmWindowPolicy, 0, len(ws))
	for i, w := range ws {
		field := fmt.Sprintf("spec.scaling.schedule[%d]", i)
		spec, err := parseCron(field+".cron", w.Cron)
		if err != nil {
			return err
		}
		if spec.Dom&starBit == 0 || spec.Month&starBit == 0 {
			return fmt.Errorf("%s.cron: %q restricts the day of the month or the month; a warm window repeats every week (minute, hour and day-of-week only), so that overlaps can be checked", field, w.Cron)
		}
		if w.Timezone != ws[0].Timezone {
			return fmt.Errorf("%s.timezone: %q differs from spec.scaling.schedule[0]'s %q; every window of a pool is read in one zone", field, w.Timezone, ws[0].Timezone)
		}
		if _, err := loadZone(field+".timezone", w.Timezone); err != nil {
			return err
		}
		if w.Duration == "" {
			return fmt.Errorf("%s.duration: required", field)
		}
		d, err := time.ParseDuration(string(w.Duration))
		if err != nil {
			return fmt.Errorf("%s.duration: %q is not a duration (such as 12h or 90m): %v", field, w.Duration, err)
		}
		if d < MinWarmWindow || d > MaxWarmWindow || d%time.Minute != 0 {
			return fmt.Errorf("%s.duration: %s must be whole minutes between %s and %s", field, d, MinWarmWindow, MaxWarmWindow)
		}
		if w.MinReady == nil {
			return fmt.Errorf("%s.minReady: required (the warm target during the window)", field)
		}
		if *w.MinReady < 0 || *w.MinReady > pol.MaxClusters {
			return fmt.Errorf("%s.minReady: %d must be between 0 and maxClusters %d", field, *w.MinReady, pol.MaxClusters)
		}
		length := int(d / time.Minute)
		for m := range minutesPerWeek {
			dow, h, mi := m/1440, m%1440/60, m%60
			if spec.Dow&(1<<dow) == 0 || spec.Hour&(1<<h) == 0 || spec.Minute&(1<<mi) == 0 {
				continue
			}
			for k := range length {
				at := (m + k) % minutesPerWeek
				if owner[at] != 0 {
					j := owner[at] - 1
					if j == i {
						return fmt.Errorf("%s: the window starting %s (%s) is still open when the next one starts at %s; windows must not overlap", field, weekMinute(start[at]), d, weekMinute(m))
					}
					return fmt.Errorf("%s: the window starting %s (%s) overlaps spec.scaling.schedule[%d]'s starting %s (%s); windows must not overlap, or which minReady holds would be ambiguous",
						field, weekMinute(m), d, j, weekMinute(start[at]), out[j].Duration)
				}
				owner[at], start[at] = i+1, m
			}
		}
		out = append(out, WarmWindowPolicy{Cron: w.Cron, Duration: d, MinReady: *w.MinReady, Timezone: w.Timezone})
	}
	pol.WarmWindows = out
	return nil
}

// weekMinute names minute m of the week (0 = Sunday 00:00), e.g. "Monday 20:00".
func weekMinute(m int) string {
	return fmt.Sprintf("%s %02d:%02d", time.Weekday(m/1440), m%1440/60, m%60)
}

// WindowEnd is when a warm window that started at start ends: start plus the window's
// duration in wall-clock time of its zone (a 12h window from 20:00 ends at 08:00, on the
// nights the clocks change too). An end that falls in the hour the clocks skip is an hour
// later in wall time (Go's time.Date normalises it so).
func (w WarmWindowPolicy) WindowEnd(start time.Time) time.Time {
	// The pool's decisions call this: the zone's rules come only from the zoneinfo.zip
	// embedded in the binary (LoadZone), never from the host's zoneinfo or ZONEINFO, so every
	// worker running one kobe version computes the same end, and so does every replay.
	//workflowcheck:ignore reads the zone's rules, fixed for a given binary
	loc, err := LoadZone(w.Timezone)
	if err != nil {
		loc = time.UTC // validated at apply; a zone that went missing since counts as UTC
	}
	l := start.In(loc)
	y, mo, d := l.Date()
	h, mi, s := l.Clock()
	return time.Date(y, mo, d, h, mi+int(w.Duration/time.Minute), s, l.Nanosecond(), loc)
}

// WarmWindowPolicy is part of workflow inputs: its duration is written as a string (json.go).
func (w WarmWindowPolicy) MarshalJSON() ([]byte, error) {
	type plain WarmWindowPolicy
	return jsonduration.Marshal(plain(w))
}

func (w *WarmWindowPolicy) UnmarshalJSON(b []byte) error {
	type plain WarmWindowPolicy
	return jsonduration.Unmarshal(b, (*plain)(w))
}
