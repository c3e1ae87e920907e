package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// LeaseUserPrefix prefixes the Kubernetes user name of per-lease credentials.
const LeaseUserPrefix = "kobe:lease:"

// LeaseGroup is the group of every per-lease credential (for audit and RBAC queries).
const LeaseGroup = "kobe:leases"

// Credentials implements backends.RuntimeBackend. Admin credentials are the instance's admin
// certificate. A per-lease credential is a client certificate for user kobe:lease:<user> that
// expires after req.TTL, bound to cluster-admin by a ClusterRoleBinding that RevokeCredentials
// deletes: the API server rejects an expired certificate (401) and a revoked user (403).
func (b *Backend) Credentials(ctx context.Context, id string, req backends.CredentialRequest) (backends.Credential, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.Credential{}, backends.ErrNotFound
	}
	if req.User != "" && in.status().Phase == backends.PhaseFrozen {
		// Its API server would not answer the binding below: say why at once.
		return backends.Credential{}, fmt.Errorf("instance %s is frozen: Thaw it before issuing a per-lease credential", id)
	}
	caPEM, err := os.ReadFile(in.path("pki", "ca.crt"))
	if err != nil {
		return backends.Credential{}, err
	}
	if req.User == "" {
		certPEM, err1 := os.ReadFile(in.path("pki", "admin.crt"))
		keyPEM, err2 := os.ReadFile(in.path("pki", "admin.key"))
		if err1 != nil || err2 != nil {
			return backends.Credential{}, fmt.Errorf("instance %s: admin credential missing", id)
		}
		cert, err := pki.ParseCert(certPEM)
		if err != nil {
			return backends.Credential{}, err
		}
		kc, err := kubeconfig.ForClientCert(id, in.endpoint(), caPEM, certPEM, keyPEM, pki.AdminUser)
		return backends.Credential{Kubeconfig: kc, User: pki.AdminUser, ExpiresAt: cert.NotAfter, ID: cert.SerialNumber.Text(16)}, err
	}
	if !idPattern.MatchString(req.User) || len(req.User) > 63 {
		return backends.Credential{}, fmt.Errorf("credential user %q: must be a DNS label", req.User)
	}
	if req.TTL <= 0 {
		return backends.Credential{}, fmt.Errorf("credential for %s: ttl must be positive", req.User)
	}
	caKey, err := os.ReadFile(in.path("pki", "ca.key"))
	if err != nil {
		return backends.Credential{}, err
	}
	ca, err := pki.LoadCA(caPEM, caKey)
	if err != nil {
		return backends.Credential{}, err
	}
	user := LeaseUserPrefix + req.User
	if err := in.apply(ctx, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": bindingName(req.User), "labels": map[string]string{"kobe.kunobi.ninja/lease": req.User}},
		"roleRef":    map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects":   []map[string]string{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}); err != nil {
		return backends.Credential{}, fmt.Errorf("binding %s: %w", user, err)
	}
	if err := in.waitAuthorized(ctx, user, LeaseGroup); err != nil {
		return backends.Credential{}, err
	}
	cred, err := ca.IssueClient(user, []string{LeaseGroup}, req.TTL)
	if err != nil {
		return backends.Credential{}, err
	}
	kc, err := kubeconfig.ForClientCert(id, in.endpoint(), caPEM, cred.CertPEM, cred.KeyPEM, user)
	return backends.Credential{Kubeconfig: kc, User: user, ExpiresAt: cred.NotAfter, ID: cred.Serial}, err
}

func bindingName(user string) string { return "kobe-lease-" + user }

// PrepareLeaseCredentials implements backends.LeasePreparer: the identity of the instance's
// next (and only) holder, a ServiceAccount bound to cluster-admin, and a token of it. Nothing
// that can sign leaves the instance's directory.
func (b *Backend) PrepareLeaseCredentials(ctx context.Context, id string) (backends.PreparedCredential, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.PreparedCredential{}, backends.ErrNotFound
	}
	caPEM, err := os.ReadFile(in.path("pki", "ca.crt"))
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	admin, err := in.adminClientset()
	if err != nil {
		return backends.PreparedCredential{}, err
	}
	return leasecred.Prepare(ctx, leasecred.Instance{ID: id, Server: in.endpoint(), ServerCA: caPEM, Admin: admin})
}

// adminClientset is the instance's API as its admin, through client-go, on the instance's
// own admin client.
func (in *instance) adminClientset() (kubernetes.Interface, error) {
	in.mu.Lock()
	c := in.client
	url := in.endpoint()
	in.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("instance %s: no admin client", in.rec.ID)
	}
	return kubernetes.NewForConfigAndClient(&rest.Config{Host: url}, c)
}

// waitAuthorized returns once the API server's authorizer allows user what the binding grants.
// The authorizer learns of a new binding through a watch, some time after the write returns
// (tens of milliseconds on SQLite, up to a second or more on kine over MySQL or PostgreSQL): a
// credential handed out before would be refused (403) on its first requests.
func (in *instance) waitAuthorized(ctx context.Context, user string, groups ...string) error {
	review := map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SubjectAccessReview",
		"spec": map[string]any{
			"user":               user,
			"groups":             groups,
			"resourceAttributes": map[string]string{"verb": "get", "resource": "namespaces"},
		},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body, err := in.do(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
		if err == nil && status == http.StatusCreated {
			var r struct {
				Status struct {
					Allowed bool `json:"allowed"`
				} `json:"status"`
			}
			if json.Unmarshal([]byte(body), &r) == nil && r.Status.Allowed {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("binding %s: the API server does not authorize it after 30s (last answer: HTTP %d %s %v)", user, status, body, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RevokeCredentials implements backends.RuntimeBackend: the lease's own binding (a credential
// issued on demand) and the holder (a lease bound with the prepared credential) go; an
// instance has one holder, so both do.
func (b *Backend) RevokeCredentials(ctx context.Context, id, user string) error {
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	status, body, err := in.do(ctx, http.MethodDelete, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"+bindingName(user), nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNotFound && status != http.StatusAccepted {
		return fmt.Errorf("revoking %s: HTTP %d: %s", user, status, body)
	}
	admin, err := in.adminClientset()
	if err != nil {
		return err
	}
	return leasecred.RevokeHolder(ctx, id, admin)
}

// do sends one request to the instance's API server as admin.
func (in *instance) do(ctx context.Context, method, path string, body any) (int, string, error) {
	in.mu.Lock()
	c := in.client
	url := in.endpoint() + path
	in.mu.Unlock()
	if c == nil {
		return 0, "", fmt.Errorf("instance %s: no admin client", in.rec.ID)
	}
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(data)), nil
}

// apply creates an object, treating "already exists" as success (idempotent).
func (in *instance) apply(ctx context.Context, collection string, obj any) error {
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		status, body, err := in.do(ctx, http.MethodPost, collection, obj)
		switch {
		case err != nil:
			lastErr = err
		case status == http.StatusCreated || status == http.StatusOK || status == http.StatusConflict:
			return nil
		case status >= 500 || status == http.StatusTooManyRequests:
			lastErr = fmt.Errorf("HTTP %d: %s", status, body)
		default:
			return fmt.Errorf("HTTP %d: %s", status, body)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return lastErr
}

// ensureFakeNodesLocked creates the kwok-managed fake nodes. Called with in.mu held, so it
// talks to the API server with the client directly.
func (in *instance) ensureFakeNodesLocked(ctx context.Context) error {
	c, url := in.client, in.endpoint()
	for i := 0; i < in.rec.Nodes; i++ {
		node := map[string]any{
			"apiVersion": "v1",
			"kind":       "Node",
			"metadata": map[string]any{
				"name":        fmt.Sprintf("kwok-node-%d", i),
				"annotations": map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				"labels": map[string]string{"type": "kwok", "kubernetes.io/hostname": fmt.Sprintf("kwok-node-%d", i),
					"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node-role.kubernetes.io/agent": ""},
			},
			"spec": map[string]any{},
			"status": map[string]any{
				"allocatable": map[string]string{"cpu": "32", "memory": "256Gi", "pods": "110"},
				"capacity":    map[string]string{"cpu": "32", "memory": "256Gi", "pods": "110"},
			},
		}
		data, _ := json.Marshal(node)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/nodes", bytes.NewReader(data))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
			return fmt.Errorf("creating fake node: HTTP %d: %s", resp.StatusCode, body)
		}
	}
	return nil
}

// readyNodesLocked counts nodes whose Ready condition is True.
func (in *instance) readyNodesLocked(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.endpoint()+"/api/v1/nodes", nil)
	if err != nil {
		return 0, err
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, err
	}
	n := 0
	for _, node := range list.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				n++
			}
		}
	}
	return n, nil
}
