package server

// The audit log's helpers, shared by every handler that changes something.

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"go.uber.org/zap"
)

// Actor is who asked for a change, as its audit events name it: a request's principal, or
// a change made for a Kubernetes resource (the resource's last writer, else "controller").
type Actor struct {
	Name string
	// RequestID ties the events of one request together (empty outside a request).
	RequestID string
}

// actorOf is the actor of a request.
func actorOf(r *http.Request) Actor {
	return Actor{Name: principalOf(r).Name, RequestID: requestID(r)}
}

// auditEvent is the audit event of a request.
func (s *Server) auditEvent(r *http.Request, action, target, pool, result string, detail map[string]any) store.Event {
	return eventBy(actorOf(r), action, target, pool, result, detail)
}

// eventBy is the audit event of a change asked for by an actor.
func eventBy(by Actor, action, target, pool, result string, detail map[string]any) store.Event {
	var raw json.RawMessage
	if detail != nil {
		raw, _ = json.Marshal(detail)
	}
	return store.Event{Actor: by.Name, Action: action, Target: target, Pool: pool, Result: result,
		RequestID: by.RequestID, Detail: raw}
}

// audit appends a request's event on its own. A mutation that only the store makes writes its
// event in the same transaction instead (InTx); audit is for what a transaction cannot hold: a
// refusal, and the request for a change only a workflow makes (a signal or an update cannot be
// taken back, so its event is written first, and a failure to write it means nothing is sent).
// The caller fails the request when audit fails (auditFailed).
func (s *Server) audit(r *http.Request, action, target, pool, result string, detail map[string]any) error {
	return s.auditBy(r.Context(), actorOf(r), action, target, pool, result, detail)
}

// auditBy is audit for a change asked for outside a request (or for one, through audit).
func (s *Server) auditBy(ctx context.Context, by Actor, action, target, pool, result string, detail map[string]any) error {
	_, err := s.Store.AppendEvent(context.WithoutCancel(ctx), eventBy(by, action, target, pool, result, detail))
	return err
}

// auditFailed answers a mutation that was not made because its audit event (or the change with
// it) could not be written: 503 degraded with the cause, so that the caller retries.
func (s *Server) auditFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	if s.Logger != nil {
		s.Logger.Error(what+": nothing was changed", zap.Error(err), zap.String("requestId", requestID(r)))
	}
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, api.ReasonDegraded, "Service unavailable",
		what+" failed, nothing was changed: "+err.Error())
}

// auditOutcome appends the event of the outcome of a change already made (whose request event
// was written first): the answer must report what happened, so a failure here is logged with
// everything the event held.
func (s *Server) auditOutcome(r *http.Request, action, target, pool, result string, detail map[string]any) {
	s.auditOutcomeBy(r.Context(), actorOf(r), action, target, pool, result, detail)
}

// auditOutcomeBy is auditOutcome for a change asked for by an actor.
func (s *Server) auditOutcomeBy(ctx context.Context, by Actor, action, target, pool, result string, detail map[string]any) {
	if err := s.auditBy(ctx, by, action, target, pool, result, detail); err != nil && s.Logger != nil {
		s.Logger.Error("audit event of an outcome lost (its request event was written)", zap.String("action", action),
			zap.String("target", target), zap.String("result", result), zap.Any("detail", detail),
			zap.String("actor", by.Name), zap.String("requestId", by.RequestID), zap.Error(err))
	}
}
