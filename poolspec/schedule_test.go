package poolspec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSleepSchedulesAreCheckedField(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Sleep
		want string // "" = accepted
	}{
		{"both", Sleep{Schedule: "0 20 * * 1-5", WakeSchedule: "0 8 * * 1-5", Timezone: "Europe/Berlin"}, ""},
		{"only sleep", Sleep{Schedule: "30 19 * * *"}, ""},
		{"only wake", Sleep{WakeSchedule: "0 7 * * 1-5"}, ""},
		{"steps and lists", Sleep{Schedule: "*/15 0,12 1-7 * *"}, ""},
		{"bad cron", Sleep{Schedule: "0 25 * * *"}, `spec.sleep.schedule: "0 25 * * *" does not parse`},
		{"six fields", Sleep{WakeSchedule: "0 0 8 * * *"}, "spec.sleep.wakeSchedule: \"0 0 8 * * *\" has 6 fields"},
		{"descriptor", Sleep{Schedule: "@daily"}, "spec.sleep.schedule: \"@daily\" is not a cron expression kobe reads"},
		{"names", Sleep{Schedule: "0 20 * * MON-FRI"}, "spec.sleep.schedule: \"0 20 * * MON-FRI\" is not a cron expression kobe reads"},
		{"tz prefix", Sleep{Schedule: "CRON_TZ=UTC 0 20 * * *"}, "spec.sleep.schedule"},
		{"dom and dow", Sleep{Schedule: "0 20 1 * 1"}, "restricts both day-of-month and day-of-week"},
		{"sunday as 7", Sleep{Schedule: "0 20 * * 7"}, "spec.sleep.schedule: \"0 20 * * 7\" does not parse"},
		{"unknown zone", Sleep{Schedule: "0 20 * * *", Timezone: "Europe/Atlantis"}, `spec.sleep.timezone: "Europe/Atlantis" is not a known time zone`},
		{"Local", Sleep{Schedule: "0 20 * * *", Timezone: "Local"}, "spec.sleep.timezone: give an IANA zone name"},
		{"zone alone", Sleep{Timezone: "Europe/Berlin"}, "spec.sleep.timezone: set without schedule or wakeSchedule"},
		{"same twice", Sleep{Schedule: "0 20 * * *", WakeSchedule: "0 20 * * *"}, "spec.sleep.wakeSchedule: the same as schedule"},
		{"exclude alone", Sleep{Exclude: []SleepExclusion{{Owner: "ci-*"}}}, "spec.sleep: exclude alone does nothing"},
		{"exclude with wake", Sleep{WakeSchedule: "0 8 * * *", Exclude: []SleepExclusion{{Owner: "ci-*"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := Policy{Backend: "local"}
			err := pol.sleep(&tc.s, true)
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.s.Schedule, pol.Sleep.Schedule)
				assert.Equal(t, tc.s.WakeSchedule, pol.Sleep.WakeSchedule)
				assert.Equal(t, tc.s.Timezone, pol.Sleep.Timezone)
				return
			}
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, pol.Sleep, "nothing half-resolved")
		})
	}
}

func ptr(n int) *int { return &n }

func TestWarmWindowsAreCheckedStrictly(t *testing.T) {
	night := WarmWindow{Cron: "0 20 * * 1-5", Duration: "12h", MinReady: ptr(0), Timezone: "Europe/Berlin"}
	weekend := WarmWindow{Cron: "0 8 * * 6", Duration: "48h", MinReady: ptr(1), Timezone: "Europe/Berlin"}
	for _, tc := range []struct {
		name string
		ws   []WarmWindow
		want string
	}{
		{"nights and weekend", []WarmWindow{night, weekend}, ""},
		// Friday 20:00 + 12h = Saturday 08:00, exactly when the weekend starts: adjacent, not overlapping.
		{"adjacent", []WarmWindow{{Cron: "0 20 * * 5", Duration: "12h", MinReady: ptr(0)}, {Cron: "0 8 * * 6", Duration: "1h", MinReady: ptr(2)}}, ""},
		{"overlap", []WarmWindow{night, {Cron: "0 6 * * 2", Duration: "1h", MinReady: ptr(4), Timezone: "Europe/Berlin"}},
			"spec.scaling.schedule[1]: the window starting Tuesday 06:00 (1h0m0s) overlaps spec.scaling.schedule[0]'s starting Monday 20:00 (12h0m0s)"},
		{"overlaps itself", []WarmWindow{{Cron: "0 20 * * *", Duration: "25h", MinReady: ptr(0)}},
			"spec.scaling.schedule[0]: the window starting Sunday 20:00 (25h0m0s) is still open when the next one starts at Monday 20:00"},
		{"wraps the week", []WarmWindow{{Cron: "0 20 * * 0", Duration: "12h", MinReady: ptr(0)}, {Cron: "0 7 * * 1", Duration: "1h", MinReady: ptr(2)}},
			"spec.scaling.schedule[1]: the window starting Monday 07:00"},
		{"monthly", []WarmWindow{{Cron: "0 20 1 * *", Duration: "1h", MinReady: ptr(0)}}, "spec.scaling.schedule[0].cron: \"0 20 1 * *\" restricts the day of the month"},
		{"bad cron", []WarmWindow{{Cron: "61 * * * *", Duration: "1h", MinReady: ptr(0)}}, "spec.scaling.schedule[0].cron"},
		{"no duration", []WarmWindow{{Cron: "0 20 * * *", MinReady: ptr(0)}}, "spec.scaling.schedule[0].duration: required"},
		{"bad duration", []WarmWindow{{Cron: "0 20 * * *", Duration: "12 hours", MinReady: ptr(0)}}, "spec.scaling.schedule[0].duration: \"12 hours\" is not a duration"},
		{"seconds", []WarmWindow{{Cron: "0 20 * * *", Duration: "90s", MinReady: ptr(0)}}, "whole minutes"},
		{"too long", []WarmWindow{{Cron: "0 20 * * 1", Duration: "169h", MinReady: ptr(0)}}, "whole minutes between 1m0s and 168h0m0s"},
		{"no minReady", []WarmWindow{{Cron: "0 20 * * *", Duration: "1h"}}, "spec.scaling.schedule[0].minReady: required"},
		{"minReady above max", []WarmWindow{{Cron: "0 20 * * *", Duration: "1h", MinReady: ptr(9)}}, "spec.scaling.schedule[0].minReady: 9 must be between 0 and maxClusters 8"},
		{"two zones", []WarmWindow{night, {Cron: "0 12 * * 0", Duration: "1h", MinReady: ptr(1), Timezone: "UTC"}}, "spec.scaling.schedule[1].timezone: \"UTC\" differs"},
		{"bad zone", []WarmWindow{{Cron: "0 20 * * *", Duration: "1h", MinReady: ptr(0), Timezone: "Mars/Olympus"}}, "spec.scaling.schedule[0].timezone: \"Mars/Olympus\" is not a known time zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := Policy{MaxClusters: 8}
			err := pol.warmWindows(tc.ws)
			if tc.want == "" {
				require.NoError(t, err)
				assert.Len(t, pol.WarmWindows, len(tc.ws))
				return
			}
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, pol.WarmWindows)
		})
	}
}

// A 12h window from 20:00 in Berlin ends at 08:00 wall-clock time, on the nights the clocks
// change too (then it lasts 11 or 13 hours).
func TestWarmWindowEndsOnTheWallClockAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	w := WarmWindowPolicy{Cron: "0 20 * * *", Duration: 12 * time.Hour, MinReady: 0, Timezone: "Europe/Berlin"}
	for _, tc := range []struct {
		start time.Time
		hours time.Duration
	}{
		{time.Date(2026, 3, 27, 20, 0, 0, 0, berlin), 12},  // CET both ends
		{time.Date(2026, 3, 28, 20, 0, 0, 0, berlin), 11},  // clocks go forward at 02:00 on the 29th
		{time.Date(2026, 3, 29, 20, 0, 0, 0, berlin), 12},  // CEST both ends
		{time.Date(2026, 10, 24, 20, 0, 0, 0, berlin), 13}, // clocks go back at 03:00 on the 25th
	} {
		end := w.WindowEnd(tc.start)
		local := end.In(berlin)
		assert.Equal(t, 8, local.Hour(), "ends at 08:00 local (%s)", local)
		assert.Equal(t, tc.start.AddDate(0, 0, 1).Day(), local.Day())
		assert.Equal(t, tc.hours*time.Hour, end.Sub(tc.start), "from %s", tc.start)
	}
	utc := WarmWindowPolicy{Duration: 90 * time.Minute}
	s := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
	assert.Equal(t, s.Add(90*time.Minute), utc.WindowEnd(s))
}

func TestManifestWithSchedulesValidates(t *testing.T) {
	p, err := Parse([]byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata:
  name: office
spec:
  backend:
    type: local
  cluster:
    version: v1.37.2
  scaling:
    minReady: 3
    maxClusters: 6
    schedule:
    - {cron: "0 20 * * 1-5", duration: 12h, minReady: 0, timezone: Europe/Berlin}
    - {cron: "0 8 * * 6", duration: 48h, minReady: 1, timezone: Europe/Berlin}
  sleep:
    schedule: "0 20 * * 1-5"
    wakeSchedule: "0 8 * * 1-5"
    timezone: Europe/Berlin
    exclude:
    - owner: "ci-*"
`))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	assert.Equal(t, []WarmWindowPolicy{{Cron: "0 20 * * 1-5", Duration: 12 * time.Hour, MinReady: 0, Timezone: "Europe/Berlin"},
		{Cron: "0 8 * * 6", Duration: 48 * time.Hour, MinReady: 1, Timezone: "Europe/Berlin"}}, pol.WarmWindows)
	assert.Equal(t, "0 20 * * 1-5", pol.Sleep.Schedule)
	_, err = Parse([]byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: office}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling:
    schedule: [{cron: "0 20 * * *", duraton: 12h, minReady: 0}]
`))
	assert.ErrorContains(t, err, "spec.scaling.schedule[0].duraton")
}
