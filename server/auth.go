package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
)

type principalKey struct{}

// anonymous is the principal of every request under --insecure-no-auth.
var anonymous = access.Principal{Name: "anonymous", Role: access.RoleAdmin}

// authed wraps a /v1 handler: it authenticates the bearer token, applies the principal's rate
// limit and checks the permission. Errors: 401 unauthorized, 429 rate_limited (Retry-After),
// 403 forbidden.
func (s *Server) authed(perm string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := anonymous
		if !s.InsecureNoAuth {
			var err error
			p, err = s.authenticate(r)
			if err != nil {
				s.authFailed(w, r, p, err, "send Authorization: Bearer <token> (kobe token create; kobe dev writes an admin token to <state-dir>/admin-token)")
				return
			}
		}
		// A portal page's in-process calls were counted once, as the page.
		if !inProcess(r.Context()) && !s.limited(w, r, &p) {
			return
		}
		role, _ := s.Policy.RoleOf(p)
		if perm != "" && !role.Can(perm) {
			writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden",
				fmt.Sprintf("role %s does not have the %s permission", p.Role, perm))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// tokenIfAny wraps a route that needs no token: a request that sends one anyway must send a
// valid one (401 otherwise), as on every other route; a bad token never reaches a handler.
func (s *Server) tokenIfAny(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.InsecureNoAuth || (r.Header.Get("Authorization") == "" && !hasSessionCookie(r)) {
			if s.limited(w, r, nil) {
				h(w, r)
			}
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.authFailed(w, r, p, err, "the bearer token is unknown, revoked or expired; this route needs none")
			return
		}
		if !inProcess(r.Context()) && !s.limited(w, r, &p) {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// authFailed answers an authentication error: 401 for a bad token (an OIDC token's detail says
// what is wrong with it: expired, audience, issuer, signature...; a kobe token's says only
// missing or invalid), 403 for a valid OIDC token no access rule admits, 503 when the token's
// issuer cannot be reached, 500 for anything else (the store). The 403 is audited like a failed
// sign-in (auditRefusal: bounded and throttled), naming the identity p turned away.
func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, p access.Principal, err error, hint string) {
	switch {
	case errors.Is(err, access.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="kobe"`)
		detail := hint
		if err != access.ErrUnauthenticated { // a wrapped one carries the OIDC verifier's reason
			detail = err.Error()
		}
		if s.Logger != nil {
			s.Logger.Info("authentication refused", zap.String("reason", err.Error()), zap.String("requestId", requestID(r)))
		}
		writeError(w, http.StatusUnauthorized, api.ReasonUnauthorized, "Unauthorized", detail)
	case errors.Is(err, errCSRF):
		writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden", err.Error())
	case errors.Is(err, access.ErrForbidden):
		method := api.AuthOIDC
		if r.Header.Get("Authorization") == "" {
			method = api.AuthSession
		}
		s.auditRefusal(r, p.Name, map[string]any{"method": method, "issuer": p.Issuer, "subject": p.Subject,
			"route": r.Method + " " + r.URL.Path, "reason": err.Error()})
		writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden", err.Error())
	case errors.Is(err, access.ErrIdentityUnavailable):
		s.unavailable(w, r, "verifying the OIDC token", err)
	default:
		s.internalError(w, r, "authenticating", err)
	}
}

func principalOf(r *http.Request) access.Principal {
	p, _ := r.Context().Value(principalKey{}).(access.Principal)
	return p
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// internalError logs the cause and answers 500 without it (it may name internals).
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if s.Logger != nil {
		s.Logger.Error(what, zap.Error(err), zap.String("requestId", requestID(r)))
	}
	writeError(w, http.StatusInternalServerError, api.ReasonInternal, "Internal error", what+" failed; see the server log, request "+requestID(r))
}

// unavailable answers 503 for a dependency (Temporal, store) that failed, with Retry-After.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, what string, err error) {
	if s.Logger != nil {
		s.Logger.Warn(what, zap.Error(err), zap.String("requestId", requestID(r)))
	}
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, api.ReasonDegraded, "Service unavailable", what+" failed: "+err.Error())
}
