package instance

// Versions of Provision's and Teardown's behaviour (workflow.GetVersion), so that runs recorded
// before a change replay as they ran.
const (
	// provisionVersionAddonsGates: Provision applies the pool's addons and waits for its
	// readiness gates before the instance is Ready.
	provisionVersionAddonsGates = "addons-gates"
	// teardownVersionReportsQuarantine: Teardown signals member-quarantined when it gives up.
	teardownVersionReportsQuarantine = "teardown-reports-quarantine"
	// provisionVersionPreparesCredentials: Provision prepares the lease credential of an
	// instance before it is Ready (issue 15: a warm bind that does not call the instance).
	provisionVersionPreparesCredentials = "prepares-lease-credentials"
)
