package api

// ErrorBody is the envelope of every /v1 error: {"error", "detail"?, "reason"?}.
type ErrorBody struct {
	Error  string     `json:"error"`
	Detail string     `json:"detail,omitempty"`
	Reason ReasonCode `json:"reason,omitempty"`
}
