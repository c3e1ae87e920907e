package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is the soak's summary; Violations lists every invariant that broke (empty: passed).
type Report struct {
	Config   config        `json:"config"`
	LoadTime time.Duration `json:"loadTime"`
	Leases   struct {
		Requested    int            `json:"requested"`
		Bound        int            `json:"bound"`
		Released     int            `json:"released"`
		Expired      int            `json:"expired"`
		Failed       map[string]int `json:"failedByReason"`
		RefusedQuota int            `json:"refusedQuotaExhausted"`
		Extensions   map[string]int `json:"extensionAnswers"`
		StoreRows    int            `json:"storeRows"`
	} `json:"leases"`
	Instances struct {
		Created  int `json:"created"`
		TornDown int `json:"tornDown"`
		Leaked   int `json:"leaked"`
		// Quarantined before the drain (all listed by the API, or a violation).
		Quarantined int `json:"quarantined"`
	} `json:"instances"`
	Audit struct {
		// Leases whose creation and end events were looked for.
		Leases int `json:"leases"`
	} `json:"audit"`
	DoubleGrants int          `json:"doubleGrants"`
	Quota        quotaSummary `json:"quota"`
	MaxMembers   int          `json:"maxMembers"`
	// MaxFrozen, MaxFrozenSched: the most frozen members seen in the soak and schedule pools.
	MaxFrozen      int `json:"maxFrozen"`
	MaxFrozenSched int `json:"maxFrozenSched"`
	Requests       struct {
		Total               int            `json:"total"`
		Valid               int            `json:"valid"`
		Invalid             map[string]int `json:"invalidByKind"`
		Status5xx           int            `json:"status5xx"`
		Unanswered          int            `json:"unanswered"`
		FailedOutsideFaults int            `json:"failedOutsideFaults"`
		// PoolMissing: valid creates answered 404 while the pool was deleted and applied again.
		PoolMissing int `json:"poolMissing"`
	} `json:"requests"`
	Faults            []fault        `json:"faults"`
	WorstRecovery     time.Duration  `json:"worstRecovery"`
	WorstRecoveryKind string         `json:"worstRecoveryKind"`
	Secrets           secretsSummary `json:"secrets"`
	// Watch: the store watcher's figures (admission, orphans, teardown).
	Watch watchSummary `json:"watch"`
	Sleep struct {
		Slept          int            `json:"slept"`
		ReleasedAsleep int            `json:"releasedAsleep"`
		BySchedule     int            `json:"sleptBySchedule"`
		SchedLeases    int            `json:"scheduleLeases"`
		Answers        map[string]int `json:"answers"`
	} `json:"sleep"`
	SignIn     signInSummary `json:"signIn"`
	Notes      []string      `json:"notes"`
	Violations []string      `json:"violations"`
}

type quotaSummary struct {
	MaxPerPrincipal   int `json:"maxActivePerPrincipal"`
	PerPrincipalLimit int `json:"maxConcurrentLeases"`
	MaxRole           int `json:"maxActiveInRole"`
	RoleQuota         int `json:"roleQuota"`
	Samples           int `json:"samples"`
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// String is the summary a person reads at the end of a run.
func (r *Report) String() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "\n=== kobe soak: %d clients, %d principals, pool warm %d / max %d, a fault every ~%s, %.1f invalid requests/s, seed %d\n",
		c.Clients, c.Principals, c.Warm, c.MaxClusters, c.FaultEvery, c.Invalid, c.Seed)
	row := func(k string, v any) { fmt.Fprintf(&b, "  %-34s %v\n", k, v) }
	row("load time", r.LoadTime.Round(time.Second))
	fmt.Fprintf(&b, "leases\n")
	row("requested (202/200)", r.Leases.Requested)
	row("bound", r.Leases.Bound)
	row("released", r.Leases.Released)
	row("expired", r.Leases.Expired)
	row("failed, by reason", sortedCounts(r.Leases.Failed))
	row("refused quota_exhausted (429)", r.Leases.RefusedQuota)
	row("extension answers", sortedCounts(r.Leases.Extensions))
	row("store rows (all terminal)", r.Leases.StoreRows)
	fmt.Fprintf(&b, "instances\n")
	row("created", r.Instances.Created)
	row("torn down", r.Instances.TornDown)
	row("leaked (must be 0)", r.Instances.Leaked)
	row("quarantined (all visible in the API)", r.Instances.Quarantined)
	row("leases with both audit events", r.Audit.Leases)
	fmt.Fprintf(&b, "invariants\n")
	row("double grants (must be 0)", r.DoubleGrants)
	row("max active per principal", fmt.Sprintf("%d (limit %d)", r.Quota.MaxPerPrincipal, r.Quota.PerPrincipalLimit))
	row("max active in role ci", fmt.Sprintf("%d (quota %d, %d samples)", r.Quota.MaxRole, r.Quota.RoleQuota, r.Quota.Samples))
	row("max pool members", fmt.Sprintf("%d (maxClusters %d)", r.MaxMembers, c.MaxClusters))
	row("max frozen members (soak / schedule)", fmt.Sprintf("%d / %d", r.MaxFrozen, r.MaxFrozenSched))
	fmt.Fprintf(&b, "requests\n")
	row("total / valid", fmt.Sprintf("%d / %d", r.Requests.Total, r.Requests.Valid))
	row("invalid, by kind", sortedCounts(r.Requests.Invalid))
	row("5xx / unanswered (all)", fmt.Sprintf("%d / %d", r.Requests.Status5xx, r.Requests.Unanswered))
	row("… outside fault windows (must be 0)", r.Requests.FailedOutsideFaults)
	row("creates finding no pool (in pool deletes)", r.Requests.PoolMissing)
	fmt.Fprintf(&b, "faults\n")
	for _, f := range r.Faults {
		rec := f.Recovery.Round(time.Millisecond).String()
		if f.Kind == faultBackend {
			rec = f.Detail
		} else if f.Detail != "" {
			rec += " (" + f.Detail + ")"
		}
		if f.Failed != "" {
			rec = "FAILED: " + f.Failed
		}
		row(f.At.Format("15:04:05")+" "+f.Kind, rec)
	}
	row("worst time to serve again", fmt.Sprintf("%s (%s)", r.WorstRecovery.Round(time.Millisecond), r.WorstRecoveryKind))
	fmt.Fprintf(&b, "issue 39 item 13\n")
	w := r.Watch
	row("admission → Bound or ended", fmt.Sprintf("worst %s (bound %s), %d store samples", w.WorstAdmission.Round(time.Second), admissionBound, w.Samples))
	row("API killed after admission", fmt.Sprintf("%d (workflow seen once served again: %d; failed orphaned: %d, worst %s, bound %s; ended %s)",
		w.Orphans, w.OrphanStarted, w.Orphaned, w.WorstOrphan.Round(time.Second), orphanBound, sortedCounts(w.OrphanEnds)))
	row("ended lease → instance gone", fmt.Sprintf("worst %s over %d leases (bound %s)", w.WorstTeardown.Round(time.Second), w.Ended, teardownBound))
	row("slept (asleep when released)", fmt.Sprintf("%d (%d); schedule pool: %d leases, %d slept by its schedule", r.Sleep.Slept, r.Sleep.ReleasedAsleep, r.Sleep.SchedLeases, r.Sleep.BySchedule))
	row("sleep/wake answers", sortedCounts(r.Sleep.Answers))
	si := r.SignIn
	row("hostile sign-ins", fmt.Sprintf("%d from %d addresses, answers %v", si.Sent, si.Addresses, si.Answers))
	row("… unauthenticated events", fmt.Sprintf("+%d (%d bytes); bound %d (%d bytes), %d checks", si.Events, si.Bytes, si.MaxEvents, si.MaxBytes, si.Checks))
	for _, n := range r.Notes {
		row("note", n)
	}
	fmt.Fprintf(&b, "secrets\n")
	row("scanned", fmt.Sprintf("%d log files (%d KiB), %d workflow histories (%d events), %d needles",
		r.Secrets.LogFiles, r.Secrets.LogBytes/1024, r.Secrets.Workflows, r.Secrets.Events, r.Secrets.Needles))
	row("found (must be 0)", len(r.Secrets.Findings))
	row("canary found in (must be > 0)", fmt.Sprintf("%d histories", r.Secrets.CanaryFound))
	if len(r.Violations) == 0 {
		fmt.Fprintf(&b, "RESULT: every invariant held\n")
	} else {
		fmt.Fprintf(&b, "RESULT: %d invariant violations\n", len(r.Violations))
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "  - %s\n", v)
		}
	}
	return b.String()
}

func sortedCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
