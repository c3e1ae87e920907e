package server_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
)

// chromium finds Debian's chromium; without it the test skips, unless
// KOBE_TEST_REQUIRE_CHROMIUM=1 (CI) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("KOBE_TEST_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium is not installed (Debian package chromium) and KOBE_TEST_REQUIRE_CHROMIUM=1")
	}
	t.Skip("chromium is not installed (Debian package chromium): the portal's browser test needs it")
	return ""
}

// artifacts is where the test's screenshots go: $KOBE_TEST_ARTIFACTS, else a folder under the
// temporary directory (kept after the test, and logged).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KOBE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kobe-test-artifacts")
	}
	dir = filepath.Join(dir, t.Name())
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

// TestPortalInBrowser: a person logs in to the portal through the real OpenID provider in
// headless Chromium, leases a cluster of the local backend (a real kube-apiserver), downloads
// its kubeconfig with the browser's session and uses it, extends and releases the lease, and
// sees the audit entries of all that — the page updating itself while the lease binds.
func TestPortalInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a real cluster and a browser; skipped with -short")
	}
	chrome := chromium(t)
	shots := artifacts(t)

	tc := testsuite.StartTemporal(t)
	box := secretbox.Random()
	const queue = "kobe-portal-test"
	var st store.Store
	e := newSSOEnv(t, func(s *server.Server) {
		s.Temporal, s.TemporalAddress, s.TaskQueue, s.Secrets = tc.Client, tc.Address, queue, box
		s.TemporalUI = "http://temporal-ui.test:8233"
		st = s.Store
	})
	h, err := worker.StartHost(worker.HostConfig{Client: tc.Client, Store: st, SharedQueue: queue, StateDir: t.TempDir(), Secrets: box})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := h.DeleteInstances(); err != nil {
			t.Logf("deleting the host's instances: %v", err)
		}
	})
	t.Cleanup(h.Stop)

	// The operator applies a pool of one warm cluster with kobe's own admin token.
	id, adminToken, err := access.NewToken()
	require.NoError(t, err)
	_, err = st.CreateToken(t.Context(), store.Token{ID: id, Name: "root", Role: "admin", Principal: "root", Hash: access.HashToken(adminToken)})
	require.NoError(t, err)
	status, raw := bearer(t, e.url, adminToken, "PUT", "/v1/pools/web", `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"web"},
		"spec":{"size":1,"ttl":"10m","backend":{"type":"local"},"cluster":{"version":"v1.37.2"}}}`)
	require.Contains(t, []int{200, 201}, status, "%s", raw)

	alloc, cancel := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1366, 900))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg) // 100: PNG (below 100 chromedp encodes JPEG)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	fail := func(what string, err error) {
		t.Helper()
		if err != nil {
			// The deadline may be what failed: the evidence is taken on a fresh one.
			ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
			defer ecancel()
			name := "failed-" + strings.ReplaceAll(what, " ", "-")
			_ = chromedp.Do(ectx, shot(name))
			if html, herr := chromedp.Run(ectx, chromedp.OuterHTML(chromedp.CSS("html"))); herr == nil {
				_ = os.WriteFile(filepath.Join(shots, name+".html"), []byte(html), 0o644)
				t.Logf("page at the failure: %s", filepath.Join(shots, name+".html"))
			}
			t.Fatalf("%s: %v", what, err)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		fail(what, chromedp.Do(ctx, actions...))
	}
	// The page re-renders parts of itself (the live refresh): a node found by the selector can
	// be replaced before it is read, and Chromium then answers "No node with given id found".
	// Such a read is tried again with the selector, a few times.
	replaced := func(err error) bool { return err != nil && strings.Contains(err.Error(), "No node with given id") }
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		for try := 0; try < 5 && replaced(err); try++ {
			time.Sleep(100 * time.Millisecond)
			v, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		}
		fail("text of "+sel, err)
		return v
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		for try := 0; try < 5 && replaced(err); try++ {
			time.Sleep(100 * time.Millisecond)
			v, err = chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		}
		fail(name+" of "+sel, err)
		require.True(t, v.Exists, "%s has %s", sel, name)
		return v.Value
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	// message selects the page's message only once it says word.
	message := func(word string) chromedp.Search {
		return chromedp.Search(`//p[@id="msg"][contains(., "` + word + `")]`)
	}

	// Log in: the portal sends the browser to the provider's login page and back.
	run("log in",
		chromedp.Navigate(e.url+"/ui/"),
		chromedp.WaitVisible(css(`#username`)),
		shot("01-provider-login"),
		chromedp.SendKeys(css(`#username`), "ada"),
		chromedp.SendKeys(css(`#password`), "pw-ada"),
		chromedp.Click(css(`#submit`)),
		chromedp.WaitVisible(css(`#principal`)),
	)
	require.Contains(t, text(`#principal`), "sso:ada@example.com")
	run("pools", chromedp.WaitVisible(css(`tr[data-pool="web"]`)), shot("02-portal"))

	// Lease a cluster; the page shows it Bound without a reload (the live refresh).
	run("lease",
		chromedp.SetValue(css(`#new-ttl`), "10m"),
		chromedp.SetValue(css(`#new-alias`), "web-1"),
		chromedp.Click(css(`#new-submit`)),
		chromedp.WaitVisible(message("requested from web")),
		chromedp.WaitVisible(css(`tr[data-lease]`)),
	)
	leaseID := attr(`tr[data-lease]`, "data-lease")
	row := `tr[data-lease="` + leaseID + `"]`
	run("bound", chromedp.WaitVisible(css(row+`[data-phase="Bound"] a.kubeconfig`)), shot("03-bound"))
	require.Contains(t, attr(row+` a.wf`, "href"), "http://temporal-ui.test:8233/namespaces/default/workflows/")

	// Download the kubeconfig with the browser's session and use it.
	kubeconfig, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`fetch(document.querySelector('a.kubeconfig').href).then(r => r.ok ? r.text() : "HTTP " + r.status)`, chromedp.EvalAwaitPromise))
	fail("kubeconfig", err)
	require.Contains(t, kubeconfig, "apiVersion: v1", kubeconfig)
	require.NoError(t, os.WriteFile(filepath.Join(shots, "kubeconfig.yaml"), []byte(kubeconfig), 0o600))
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	nss, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, nss.Items, "the leased cluster answers")

	// Extend, then release.
	run("extend click",
		chromedp.SetValue(css(row+` form.extend input[name="ttl"]`), "2m"),
		chromedp.Click(css(row+` form.extend button`)))
	// Each form posts and the server answers with a new page and its message. Waiting for just
	// "#msg" could match the page before the post, still showing the previous message (CI saw
	// "extended" read after the release click), so each step waits for its own message.
	run("extend",
		chromedp.WaitVisible(message("extended")),
		chromedp.WaitVisible(css(row+` td.ext[data-n="1"]`)), // at once, or with the next live refresh
		shot("04-extended"),
	)
	run("release", chromedp.Click(css(row+` form.release button`)), chromedp.WaitVisible(message("released")))

	// The audit log shows all of it under the person's identity.
	run("audit",
		chromedp.Navigate(e.url+"/ui/audit?actor=sso:ada@example.com"),
		chromedp.WaitVisible(css(`tr[data-action="lease.release"]`)),
		chromedp.WaitVisible(css(`tr[data-action="lease.extend"]`)),
		chromedp.WaitVisible(css(`tr[data-action="lease.create"]`)),
		chromedp.WaitVisible(css(`tr[data-action="login"]`)),
		shot("05-audit"),
	)

	// The admin view lists the instance; then log out.
	run("admin", chromedp.Navigate(e.url+"/ui/admin"), chromedp.WaitVisible(css(`#instances`)), shot("06-admin"))
	run("logout", chromedp.Click(css(`#logout`)), chromedp.WaitVisible(css(`#username`)))
	require.NotEmpty(t, e.events("logout"))
}

// bearer sends a request with a bearer token.
func bearer(t *testing.T, base, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}
