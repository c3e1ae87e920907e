package api

import (
	"encoding/json"
	"net/http"
)

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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, reason, msg, detail string) {
	writeJSON(w, status, ErrorBody{Error: msg, Detail: detail, Reason: reason})
}
