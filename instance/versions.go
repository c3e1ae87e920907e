package instance

import "time"

// Versions of Provision's and Teardown's behaviour (workflow.GetVersion), so that runs recorded
// before a change replay as they ran.
const (
	// provisionVersionAddonsGates: Provision applies the pool's addons and waits for its
	// readiness gates before the instance is Ready.
	provisionVersionAddonsGates = "addons-gates"
	// provisionVersionHostCluster: a Provision whose pool names its host cluster places the
	// instance through that host cluster's queue (only such runs carry the marker).
	provisionVersionHostCluster = "host-cluster"
	// teardownVersionReportsQuarantine: Teardown signals member-quarantined when it gives up.
	teardownVersionReportsQuarantine = "teardown-reports-quarantine"
	// provisionVersionPreparesCredentials: Provision prepares the lease credential of an
	// instance before it is Ready (issue 15: a warm bind that does not call the instance).
	provisionVersionPreparesCredentials = "prepares-lease-credentials"
	// provisionVersionGolden: a Provision whose pool has golden templates builds (or finds)
	// the pool's template and creates the member from it, without its addons (only such runs
	// carry the marker).
	provisionVersionGolden = "golden-template"
	// wakeVersionReissuesCertificates: a Wake checks the certificates of the instance it
	// resumed and re-issues them in place (cause "wake") when they expire within its minimum,
	// or fails when they expired and cannot be, before it waits until the instance is ready.
	wakeVersionReissuesCertificates = "wake-reissues-certificates"
)

// HostClusterWait bounds how long a Provision waits for a worker of its pool's host cluster to
// take the placement.
const HostClusterWait = time.Minute
