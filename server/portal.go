package server

// The portal under /ui: server-rendered pages (html/template, embedded assets) for the people
// who lease clusters. Every piece of data a page shows and every change a form makes goes
// through the REST API's own routes — the page handler calls them in-process with the
// browser's session cookie (and, for a change, the form's CSRF token) — so the portal has no
// access model of its own: what a person sees and may do is exactly what their session may do
// through /v1.

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
)

//go:embed portal
var portalFiles embed.FS

var portalTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"since": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"at":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"detail": func(d map[string]any) string { b, _ := json.Marshal(d); return string(b) },
	"has":    slices.Contains[[]string, string],
	// dict3 is the argument of the "wf" template: the Temporal Web UI, namespace, workflow id.
	"dict3": func(ui, ns, id string) workflowLink { return workflowLink{UI: ui, NS: ns, ID: id} },
}).ParseFS(portalFiles, "portal/*.html"))

// portal serves /ui; api is the mux of the /v1 routes it calls.
type portal struct {
	s   *Server
	api http.Handler
}

func (s *Server) portalRoutes(mux *http.ServeMux) {
	p := &portal{s: s, api: mux}
	static, _ := fs.Sub(portalFiles, "portal/static")
	// What carries no credentials counts against the client address (abuse.go); the pages
	// count against their principal (who).
	mux.HandleFunc("GET /ui/static/", s.byAddress(http.StripPrefix("/ui/static/", http.FileServerFS(static)).ServeHTTP))
	mux.HandleFunc("GET /ui/login", s.byAddress(s.handleLogin))
	mux.HandleFunc("GET /ui/callback", s.byAddress(s.handleCallback))
	mux.HandleFunc("POST /ui/logout", s.byAddress(s.handleLogout))
	mux.HandleFunc("GET /ui", s.byAddress(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) }))
	mux.HandleFunc("GET /ui/{$}", p.page("leases", p.leasesPage))
	mux.HandleFunc("GET /ui/admin", p.page("admin", p.adminPage))
	mux.HandleFunc("GET /ui/audit", p.page("audit", p.auditPage))
	mux.HandleFunc("GET /ui/leases/{id}/kubeconfig", p.kubeconfig)
	mux.HandleFunc("POST /ui/leases", p.mutation(p.createLease))
	mux.HandleFunc("POST /ui/leases/{id}/extend", p.mutation(p.extendLease))
	mux.HandleFunc("POST /ui/leases/{id}/release", p.mutation(p.releaseLease))
}

// workflowLink is a link to a workflow in the Temporal Web UI.
type workflowLink struct{ UI, NS, ID string }

// pageData is what every page template gets.
type pageData struct {
	Page       string
	Principal  string
	Role       string
	CSRF       string
	Message    string
	Live       bool
	TemporalUI string
	Namespace  string
	Data       any
}

// who authenticates a portal request (the session cookie, or a bearer token of a script) and
// counts it against the principal's rate (once: the page's in-process /v1 calls do not count
// again); without credentials the browser is sent to log in, which counts against its address.
func (p *portal) who(w http.ResponseWriter, r *http.Request) (access.Principal, string, bool) {
	if p.s.InsecureNoAuth {
		return anonymous, "", p.s.limited(w, r, &anonymous)
	}
	pr, err := p.s.authenticate(r)
	if errors.Is(err, access.ErrUnauthenticated) {
		if !p.s.limited(w, r, nil) {
			return pr, "", false
		}
		if !p.s.loginConfigured() {
			p.s.portalError(w, r, http.StatusUnauthorized, "SSO login is not configured (the access policy has no oidc.login); the portal needs a session")
			return pr, "", false
		}
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
		return pr, "", false
	}
	if err != nil {
		p.s.authFailed(w, r, pr, err, "")
		return pr, "", false
	}
	if !p.s.limited(w, r, &pr) {
		return pr, "", false
	}
	csrf := ""
	if c, err := r.Cookie(SessionCookie); err == nil {
		csrf = csrfToken(c.Value)
	}
	return pr, csrf, true
}

// page renders a page: the whole document, or only its live part when the refresh script asks
// (X-Kobe-Fragment).
func (p *portal) page(name string, fill func(r *http.Request, d *pageData) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, csrf, ok := p.who(w, r)
		if !ok {
			return
		}
		d := &pageData{Page: name, Principal: pr.Name, Role: pr.Role, CSRF: csrf, Message: r.URL.Query().Get("msg"),
			TemporalUI: strings.TrimSuffix(p.s.TemporalUI, "/"), Namespace: p.s.Namespace}
		if d.Namespace == "" {
			d.Namespace = "default"
		}
		if err := fill(r, d); err != nil {
			p.s.portalError(w, r, http.StatusBadGateway, err.Error())
			return
		}
		tmpl := name + ".html"
		if r.Header.Get("X-Kobe-Fragment") != "" {
			tmpl = name + "-live"
		}
		var buf bytes.Buffer
		if err := portalTemplates.ExecuteTemplate(&buf, tmpl, d); err != nil {
			p.s.internalError(w, r, "rendering "+name, err)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes())
	}
}

// apiError is a /v1 answer other than success, in the API's envelope.
type apiError struct {
	status int
	body   api.ErrorBody
}

func (e *apiError) Error() string {
	if e.body.Detail != "" {
		return e.body.Error + ": " + e.body.Detail
	}
	return fmt.Sprintf("%s (%d)", e.body.Error, e.status)
}

// call sends a request to a /v1 route in-process, authenticated as the browser's request is
// (its cookie or Authorization header), with csrf as the CSRF token of a change; out receives
// the JSON answer. Non-2xx answers are *apiError.
func (p *portal) call(r *http.Request, method, path, csrf string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.WithValue(r.Context(), inProcessKey{}, true), method, path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range []string{"Cookie", "Authorization", "X-Request-Id"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if csrf != "" {
		req.Header.Set(CSRFHeader, csrf)
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	p.api.ServeHTTP(rec, req)
	if rec.status >= 300 {
		e := &apiError{status: rec.status}
		_ = json.Unmarshal(rec.body.Bytes(), &e.body)
		return e
	}
	if out != nil && rec.body.Len() > 0 {
		if raw, ok := out.(*[]byte); ok {
			*raw = rec.body.Bytes()
			return nil
		}
		return json.Unmarshal(rec.body.Bytes(), out)
	}
	return nil
}

// recorder is an in-process http.ResponseWriter.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rc *recorder) Header() http.Header         { return rc.header }
func (rc *recorder) Write(b []byte) (int, error) { return rc.body.Write(b) }
func (rc *recorder) WriteHeader(code int)        { rc.status = code }

// leasesData is the main page: the pools the caller may use and their own leases.
type leasesData struct {
	Pools  []api.PoolView
	Leases []leaseRow
}

type leaseRow struct {
	api.Lease
	Workflow string // the lease workflow's id (Temporal Web UI link)
}

func (p *portal) leasesPage(r *http.Request, d *pageData) error {
	var data leasesData
	d.Live = true
	if err := p.call(r, "GET", "/v1/pools", "", nil, &data.Pools); err != nil && !forbidden(err) {
		return err
	}
	var leases []api.Lease
	if err := p.call(r, "GET", "/v1/leases", "", nil, &leases); err != nil && !forbidden(err) {
		return err
	}
	for _, l := range leases {
		// The list is the store's rows; a held lease's extensions and expiry live in its
		// workflow, which its own route asks (a person holds few leases).
		if l.Phase == api.LeaseBound {
			var full api.Lease
			// Showing the lease in a page that refreshes itself is not its holder's activity.
			if err := p.call(r.WithContext(notActivity(r.Context())), "GET", "/v1/leases/"+url.PathEscape(l.ID), "", nil, &full); err == nil {
				full.Kubeconfig = ""
				l = full
			}
		}
		data.Leases = append(data.Leases, leaseRow{Lease: l, Workflow: leasestart.WorkflowID(l.ID)})
	}
	d.Data = data
	return nil
}

func forbidden(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.status == http.StatusForbidden
}

// adminData: every instance (Quarantined ones too) and every pool's leases; Forbidden when
// the caller's role may not see them (pool.admin).
type adminData struct {
	Forbidden string
	Instances []api.Instance
	Leases    []adminLease
}

type adminLease struct {
	api.PoolLease
	Pool     string
	Workflow string
}

func (p *portal) adminPage(r *http.Request, d *pageData) error {
	var data adminData
	d.Live = true
	d.Data = &data
	if err := p.call(r, "GET", "/v1/instances", "", nil, &data.Instances); err != nil {
		if forbidden(err) {
			data.Forbidden = err.Error()
			return nil
		}
		return err
	}
	var pools []api.PoolView
	if err := p.call(r, "GET", "/v1/pools", "", nil, &pools); err != nil {
		return err
	}
	for _, pl := range pools {
		var leases []api.PoolLease
		if err := p.call(r, "GET", "/v1/pools/"+url.PathEscape(pl.Name)+"/leases", "", nil, &leases); err != nil {
			return err
		}
		for _, l := range leases {
			data.Leases = append(data.Leases, adminLease{PoolLease: l, Pool: pl.Name, Workflow: leasestart.WorkflowID(l.ID)})
		}
	}
	return nil
}

// auditData is the audit log, newest first, with the filters used.
type auditData struct {
	Forbidden string
	Filter    map[string]string
	Events    []api.AuditEvent
}

func (p *portal) auditPage(r *http.Request, d *pageData) error {
	data := auditData{Filter: map[string]string{}}
	d.Live = true
	d.Data = &data
	q := url.Values{}
	for _, k := range []string{"actor", "action", "pool", "target", "since"} {
		if v := strings.TrimSpace(r.URL.Query().Get(k)); v != "" {
			q.Set(k, v)
			data.Filter[k] = v
		}
	}
	var list api.AuditList
	if err := p.call(r, "GET", "/v1/audit?"+q.Encode(), "", nil, &list); err != nil {
		var e *apiError
		if forbidden(err) || (errors.As(err, &e) && e.status == http.StatusBadRequest) {
			data.Forbidden = err.Error()
			return nil
		}
		return err
	}
	slices.Reverse(list.Items)
	if len(list.Items) > 500 {
		list.Items = list.Items[:500]
	}
	data.Events = list.Items
	return nil
}

// mutation wraps a form post: the form's CSRF token goes with the API call (whose guard checks
// it), and the browser goes back to the page with the outcome.
func (p *portal) mutation(do func(r *http.Request, csrf string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if _, _, ok := p.who(w, r); !ok { // checks the form's CSRF token (the session's)
			return
		}
		if err := r.ParseForm(); err != nil {
			p.s.portalError(w, r, http.StatusBadRequest, "not a form")
			return
		}
		msg, err := do(r, r.PostFormValue(csrfField))
		var e *apiError
		if errors.As(err, &e) && e.status == http.StatusForbidden && e.body.Detail == errCSRF.Error() {
			writeError(w, http.StatusForbidden, api.ReasonForbidden, "Forbidden", errCSRF.Error())
			return
		}
		if err != nil {
			msg = err.Error()
		}
		back := safeNext(r.PostFormValue("back"))
		http.Redirect(w, r, back+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
	}
}

func (p *portal) createLease(r *http.Request, csrf string) (string, error) {
	req := api.LeaseRequest{Pool: r.PostFormValue("pool"), TTL: r.PostFormValue("ttl"), Alias: r.PostFormValue("alias")}
	var l api.Lease
	if err := p.call(r, "POST", "/v1/leases", csrf, req, &l); err != nil {
		return "", err
	}
	return fmt.Sprintf("Lease %s requested from %s (%s)", l.ID, l.Pool, l.Phase), nil
}

func (p *portal) extendLease(r *http.Request, csrf string) (string, error) {
	id := r.PathValue("id")
	var out api.ExtendResponse
	if err := p.call(r, "PATCH", "/v1/leases/"+url.PathEscape(id), csrf, api.ExtendRequest{ExtendTTL: r.PostFormValue("ttl")}, &out); err != nil {
		return "", err
	}
	return fmt.Sprintf("Lease %s extended by %s", id, r.PostFormValue("ttl")), nil
}

func (p *portal) releaseLease(r *http.Request, csrf string) (string, error) {
	id := r.PathValue("id")
	if err := p.call(r, "DELETE", "/v1/leases/"+url.PathEscape(id), csrf, nil, nil); err != nil {
		return "", err
	}
	return "Lease " + id + " released", nil
}

// kubeconfig downloads a Bound lease's kubeconfig (GET /v1/leases/{id}/kubeconfig).
func (p *portal) kubeconfig(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := p.who(w, r); !ok {
		return
	}
	id := r.PathValue("id")
	var raw []byte
	if err := p.call(r, "GET", "/v1/leases/"+url.PathEscape(id)+"/kubeconfig", "", nil, &raw); err != nil {
		var e *apiError
		if errors.As(err, &e) {
			writeJSON(w, e.status, e.body)
			return
		}
		p.s.internalError(w, r, "reading the kubeconfig", err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Disposition", `attachment; filename="kubeconfig-`+strings.Map(fileSafe, id)+`.yaml"`)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(raw)
}

func fileSafe(r rune) rune {
	if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
		return r
	}
	return '_'
}

// portalError shows an error page.
func (s *Server) portalError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = portalTemplates.ExecuteTemplate(w, "error.html", map[string]any{"Status": status, "Message": msg, "Login": s.loginConfigured()})
}
