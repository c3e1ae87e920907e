package lease

import "time"

// LeaseCondition is one observation about a lease, in the shape of Kubernetes conditions.
type LeaseCondition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"` // "True" or "False"
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// ConditionInstanceHealthy is False once the lease's instance failed its health checks.
const ConditionInstanceHealthy = "InstanceHealthy"
