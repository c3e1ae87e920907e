package instance

// Versions of Provision's and Teardown's behaviour (workflow.GetVersion), so that runs recorded
// before a change replay as they ran.
const (
	// provisionVersionAddonsGates: Provision applies the pool's addons and waits for its
	// readiness gates before the instance is Ready.
	provisionVersionAddonsGates = "addons-gates"
	// teardownVersionReportsQuarantine: Teardown signals member-quarantined when it gives up.
	teardownVersionReportsQuarantine = "teardown-reports-quarantine"
)
