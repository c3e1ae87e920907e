package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
)

func tokenView(t store.Token) api.Token {
	v := api.Token{ID: t.ID, Name: t.Name, Role: t.Role, Principal: t.Principal, CreatedAt: t.CreatedAt}
	for _, f := range []struct {
		src time.Time
		dst **time.Time
	}{{t.ExpiresAt, &v.ExpiresAt}, {t.RevokedAt, &v.RevokedAt}, {t.LastUsedAt, &v.LastUsedAt}} {
		if !f.src.IsZero() {
			x := f.src
			*f.dst = &x
		}
	}
	return v
}

// invalidInput marks an error in the caller's request (400), as opposed to a store failure.
type invalidInput struct{ error }

// CreateToken makes a token for a role of the policy and returns it with its secret (the only
// time the secret is seen: the store keeps its hash).
func CreateToken(r *http.Request, st store.Store, pol *access.Policy, req api.TokenRequest) (api.Token, error) {
	if req.Name == "" || len(req.Name) > 100 || strings.ContainsAny(req.Name, "\n\r\t") {
		return api.Token{}, invalidInput{errors.New("name: required, one line of at most 100 characters")}
	}
	if _, ok := pol.Role(req.Role); !ok {
		return api.Token{}, invalidInput{fmt.Errorf("role: %q is not a role of the policy (roles: %s)", req.Role, strings.Join(pol.RoleNames(), ", "))}
	}
	if req.Principal == "" {
		req.Principal = req.Name
	}
	if is, ok := pol.InOIDCNamespace(req.Principal); ok {
		return api.Token{}, invalidInput{fmt.Errorf("principal: %q is in the namespace of OIDC issuer %s (its principals start with %q): a token cannot act as one of its identities",
			req.Principal, is.Issuer, is.Prefix())}
	}
	var expires time.Time
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return api.Token{}, invalidInput{fmt.Errorf("ttl: %q is not a positive duration (e.g. 720h)", req.TTL)}
		}
		expires = time.Now().Add(d)
	}
	id, secret, err := access.NewToken()
	if err != nil {
		return api.Token{}, err
	}
	t, err := st.CreateToken(r.Context(), store.Token{ID: id, Name: req.Name, Role: req.Role, Principal: req.Principal,
		Hash: access.HashToken(secret), ExpiresAt: expires})
	if err != nil {
		return api.Token{}, err
	}
	v := tokenView(t)
	v.Secret = secret
	return v, nil
}

func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.TokenRequest
	if !decodeBody(w, r, &req) {
		return
	}
	// The token and its event are one transaction: no token without its token.create.
	var t api.Token
	err := s.Store.InTx(r.Context(), func(tx store.Store) error {
		var err error
		if t, err = CreateToken(r, tx, s.Policy, req); err != nil {
			return err
		}
		_, err = tx.AppendEvent(r.Context(), s.auditEvent(r, "token.create", t.ID, "", "ok",
			map[string]any{"name": t.Name, "role": t.Role, "principal": t.Principal}))
		return err
	})
	var bad invalidInput
	switch {
	case errors.As(err, &bad):
		badRequest(w, err.Error())
		return
	case errors.Is(err, store.ErrAuditWrite):
		s.auditFailed(w, r, "creating the token", err)
		return
	case err != nil:
		s.unavailable(w, r, "creating the token", err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (s *Server) handleTokenList(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Store.ListTokens(r.Context())
	if err != nil {
		s.unavailable(w, r, "listing tokens", err)
		return
	}
	out := api.TokenList{Items: []api.Token{}}
	for _, t := range ts {
		out.Items = append(out.Items, tokenView(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.Store.InTx(r.Context(), func(tx store.Store) error {
		if err := tx.RevokeToken(r.Context(), id); err != nil {
			return err
		}
		_, err := tx.AppendEvent(r.Context(), s.auditEvent(r, "token.revoke", id, "", "ok", nil))
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "Token not found", fmt.Sprintf("no token %q", id))
		return
	case errors.Is(err, store.ErrAuditWrite):
		s.auditFailed(w, r, "revoking the token", err)
		return
	case err != nil:
		s.unavailable(w, r, "revoking the token", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleAudit lists audit events, oldest first: ?since=RFC3339|duration&actor=&pool=&action=&after=&limit=.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.EventFilter{Actor: q.Get("actor"), Pool: q.Get("pool"), Action: q.Get("action"), Target: q.Get("target"), Limit: 1000}
	if v := q.Get("since"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else {
			badRequest(w, fmt.Sprintf("since: %q is neither a duration (1h) nor an RFC 3339 time", v))
			return
		}
	}
	for name, dst := range map[string]*int{"limit": &f.Limit} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 10000 {
				badRequest(w, fmt.Sprintf("%s: %q is not a number in [1, 10000]", name, v))
				return
			}
			*dst = n
		}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			badRequest(w, fmt.Sprintf("after: %q is not an event id", v))
			return
		}
		f.AfterID = n
	}
	evs, err := s.Store.ListEvents(r.Context(), f)
	if err != nil {
		s.unavailable(w, r, "reading the audit log", err)
		return
	}
	out := api.AuditList{Items: []api.AuditEvent{}}
	for _, e := range evs {
		ae := api.AuditEvent{ID: e.ID, Time: e.Time, Actor: e.Actor, Action: e.Action, Target: e.Target, Result: e.Result, RequestID: e.RequestID}
		_ = jsonUnmarshal(e.Detail, &ae.Detail)
		out.Items = append(out.Items, ae)
	}
	writeJSON(w, http.StatusOK, out)
}
