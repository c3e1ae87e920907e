package instance

// The signals Provision and Teardown send to the pool that started them (ProvisionInput.NotifyPool,
// TeardownInput.NotifyPool), and their payload. The pool imports them.
const (
	SignalMemberReady = "member-ready"  // MemberReport, from Provision
	SignalMemberFail  = "member-failed" // MemberReport (Reason = why), from Provision
	SignalMemberGone  = "member-gone"   // MemberReport, from Teardown
	// SignalMemberQuarantined: Teardown gave up deleting the member (MemberReport, Reason = why).
	SignalMemberQuarantined = "member-quarantined"
)

// MemberReport is Provision's or Teardown's word about an instance.
type MemberReport struct {
	InstanceID string         `json:"instanceId"`
	Placement  HostAssignment `json:"placement"`
	Endpoint   string         `json:"endpoint,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	// Prepared says a Ready member's lease credential was prepared (PrepareLeaseCredentials):
	// a claim can bind it at once.
	Prepared bool `json:"prepared,omitempty"`
}

// Metrics Provision emits through the SDK's metrics handler (see pool/metrics.go).
const (
	// MetricInstanceCreateDuration is create → Ready (or failure) of a member, by backend and outcome.
	MetricInstanceCreateDuration = "kobe_instance_create_duration_seconds"
	// MetricInstanceCreates counts member creations by backend and outcome (success, failure).
	MetricInstanceCreates = "kobe_instance_creates_total"
)
