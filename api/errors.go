package api

// Reason codes are part of the API contract: clients branch on them, so they never change.
const (
	ReasonInvalidRequest = "invalid_request"
	ReasonNotFound       = "not_found"
	ReasonNotReady       = "not_ready"
	ReasonBackendError   = "backend_error"
	ReasonDegraded       = "degraded"
	ReasonInternal       = "internal"
)

// ErrorBody is the envelope of every /v1 error: {"error", "detail"?, "reason"?}.
type ErrorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason,omitempty"`
}
