package server

import (
	"encoding/json"
	"net/http"

	"github.com/kunobi-ninja/kobe/api"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, reason api.ReasonCode, msg, detail string) {
	writeJSON(w, status, api.ErrorBody{Error: msg, Detail: detail, Reason: reason})
}
