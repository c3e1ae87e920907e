package server

// Request decoding and the answers to bad requests, shared by every handler.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/kunobi-ninja/kobe/api"
)

// decodeBody reads a JSON body strictly: unknown fields, trailing data and oversized bodies are
// invalid requests. Field names are matched exactly: encoding/json alone would take
// "EXTENDTTL" for extendTtl, and a client that misspells a field deserves to be told.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		msg := err.Error()
		if errors.Is(err, io.EOF) {
			msg = "empty body; expected a JSON object"
		}
		writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", "body: "+msg)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", "body: trailing data after the JSON object")
		return false
	}
	if err := exactFieldNames(raw, v); err != nil {
		writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", "body: "+err.Error())
		return false
	}
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", "body: "+err.Error())
		return false
	}
	return true
}

// exactFieldNames refuses a top-level key of a JSON object that names a field of v's struct in
// another case; keys that name no field at all are left to DisallowUnknownFields.
func exactFieldNames(raw json.RawMessage, v any) error {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil // not an object: the strict decode says why
	}
	fields := jsonFields(t)
	for key := range obj {
		for _, f := range fields {
			if key != f.name && strings.EqualFold(key, f.name) {
				return fmt.Errorf("unknown field %q (field names are case-sensitive: %q)", key, f.name)
			}
		}
	}
	return nil
}

func badRequest(w http.ResponseWriter, detail string) {
	writeError(w, http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", detail)
}
