// Package readiness checks a pool's readiness gates (spec.readinessGates) against a new member.
// A member becomes Ready only once every gate passes; Check is one attempt, WaitAll polls.
//
// What each gate checks:
//
//   - CRDExists{name}: the CustomResourceDefinition exists and is Established.
//   - NodesReady{count}: at least count nodes have condition Ready=True.
//   - DeploymentReady{name, namespace}: the controller has observed the current generation and
//     the rollout is complete: updated, total and available replicas all equal spec.replicas.
//   - DaemonSetReady{name, namespace}: observed generation current, at least one pod desired, and
//     updated, ready and available pods all equal the desired number.
//   - URLHealthy{url}: an HTTP GET of the URL, from the kobe worker (not from inside the
//     cluster), answers 2xx or 3xx within 5 s; redirects are not followed.
//   - SchedulingProbe{namespace}: a pause pod created in the namespace is bound to a node (the
//     scheduler works and a node accepts ordinary pods); the pod is deleted afterwards.
//   - DNSHealthy{namespace}: the namespace exists and the cluster DNS Service (kube-dns, or
//     coredns) in kube-system has at least one ready endpoint. It does not resolve names from
//     inside the cluster: that would need a pod whose container actually runs.
//   - InClusterToken{namespace, serviceAccount}: the ServiceAccount exists (an addon creates
//     it), a token can be requested for it (TokenRequest), and the API server authenticates
//     that token as system:serviceaccount:<namespace>:<serviceAccount> (TokenReview).
//   - X509Valid{minRemaining}: every certificate the member's admin kubeconfig relies on (its CA,
//     its client certificate, and the serving certificate the API server presents in the TLS
//     handshake) is valid for at least minRemaining more. A member that fails it never passes
//     later (certificates only age): WaitAll gives up on it at once (ErrNeverPasses).
package readiness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// Bounds of one attempt. They are generous: a gate that is slow to pass is retried by WaitAll,
// and its overall deadline is the caller's.
const (
	attemptTimeout = 30 * time.Second
	urlTimeout     = 5 * time.Second
	// The scheduling probe gives the scheduler this long to bind or refuse its pod.
	scheduleTimeout = 20 * time.Second
	// ProbeImage is the image of the scheduling probe's pod. It is never pulled unless a real
	// kubelet runs it; then it is the smallest image that stays up.
	ProbeImage = "registry.k8s.io/pause:3.10"
)

// ErrUnsupported is wrapped by Check for a gate type it does not know: retrying cannot help.
var ErrUnsupported = errors.New("unsupported readiness gate")

// ErrNeverPasses is wrapped by Check for a gate that failed in a way no wait can mend (a
// certificate that expires too soon): WaitAll stops at once.
var ErrNeverPasses = errors.New("the gate cannot pass later")

// Describe names a gate in progress reports and errors, e.g. "DeploymentReady kube-system/coredns".
func Describe(g poolspec.ReadinessGate) string {
	switch g.Type {
	case "CRDExists":
		return "CRDExists " + g.Name
	case "NodesReady":
		return fmt.Sprintf("NodesReady %d", g.Count)
	case "DeploymentReady", "DaemonSetReady":
		return fmt.Sprintf("%s %s/%s", g.Type, g.Namespace, g.Name)
	case "URLHealthy":
		return "URLHealthy " + g.URL
	case "SchedulingProbe", "DNSHealthy":
		return g.Type + " " + g.Namespace
	case "InClusterToken":
		return fmt.Sprintf("InClusterToken %s/%s", g.Namespace, g.ServiceAccount)
	case "X509Valid":
		return "X509Valid " + string(g.MinRemaining)
	}
	return g.Type
}

// Check makes one attempt at a gate: nil when it passes, otherwise an error saying what is not
// ready yet (e.g. "deployment kube-system/coredns: 0/1 replicas available").
func Check(ctx context.Context, cfg *rest.Config, gate poolspec.ReadinessGate) error {
	c, err := newChecker(cfg)
	if err != nil {
		return err
	}
	return c.check(ctx, gate)
}

// WaitAll checks every gate each interval until all have passed or ctx ends. A gate that has
// passed is not checked again (the scheduling probe creates a pod each time). progress, if not
// nil, is called after each round with the gates still pending. The error lists every gate that
// had not passed, with its last reason; a gate of an unsupported type fails at once.
func WaitAll(ctx context.Context, cfg *rest.Config, gates []poolspec.ReadinessGate, interval time.Duration, progress func(pending string)) error {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	c, err := newChecker(cfg)
	if err != nil {
		return err
	}
	notChecked := errors.New("not checked yet")
	failing := map[int]error{}
	for i := range gates {
		failing[i] = notChecked
	}
	for {
		for i := range gates {
			if _, ok := failing[i]; !ok {
				continue
			}
			err := c.check(ctx, gates[i])
			if err == nil {
				delete(failing, i)
				continue
			}
			if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrNeverPasses) {
				return fmt.Errorf("%s: %w", Describe(gates[i]), err)
			}
			if ctx.Err() != nil && failing[i] != notChecked {
				// Cut short by the deadline: the previous round's reason says more than
				// "context deadline exceeded".
				continue
			}
			failing[i] = err
		}
		if len(failing) == 0 {
			return nil
		}
		pending := summarize(gates, failing)
		if progress != nil {
			progress(pending)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d readiness gates not passed: %s", len(failing), len(gates), pending)
		case <-time.After(interval):
		}
	}
}

// summarize lists the failing gates in spec order: "DeploymentReady demo/web: …; NodesReady 1: …".
func summarize(gates []poolspec.ReadinessGate, failing map[int]error) string {
	idx := make([]int, 0, len(failing))
	for i := range failing {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	parts := make([]string, len(idx))
	for n, i := range idx {
		parts[n] = fmt.Sprintf("%s: %v", Describe(gates[i]), failing[i])
	}
	return strings.Join(parts, "; ")
}

type checker struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	cfg  *rest.Config
}

func newChecker(cfg *rest.Config) (*checker, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &checker{kube: kube, dyn: dyn, cfg: cfg}, nil
}

func (c *checker) check(ctx context.Context, g poolspec.ReadinessGate) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	switch g.Type {
	case "CRDExists":
		return c.crdExists(ctx, g.Name)
	case "NodesReady":
		return c.nodesReady(ctx, g.Count)
	case "DeploymentReady":
		return c.deploymentReady(ctx, g.Namespace, g.Name)
	case "DaemonSetReady":
		return c.daemonSetReady(ctx, g.Namespace, g.Name)
	case "URLHealthy":
		return urlHealthy(ctx, g.URL)
	case "SchedulingProbe":
		return c.schedulingProbe(ctx, g.Namespace)
	case "DNSHealthy":
		return c.dnsHealthy(ctx, g.Namespace)
	case "InClusterToken":
		return c.inClusterToken(ctx, g.Namespace, g.ServiceAccount)
	case "X509Valid":
		return c.x509Valid(ctx, g.MinRemaining)
	}
	return fmt.Errorf("gate type %q: %w", g.Type, ErrUnsupported)
}

// notFound turns a 404 into a short reason; other errors keep their text.
func notFound(what string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: not found", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (c *checker) crdExists(ctx context.Context, name string) error {
	what := "crd " + name
	crd, err := c.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(what, err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return nil
		}
		if m["type"] == "NamesAccepted" && m["status"] == "False" {
			return fmt.Errorf("%s: names not accepted: %v", what, m["message"])
		}
	}
	return fmt.Errorf("%s: not Established yet", what)
}

func (c *checker) nodesReady(ctx context.Context, want int) error {
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < want {
		return fmt.Errorf("nodes: %d/%d Ready (%d registered)", ready, want, len(nodes.Items))
	}
	return nil
}

func (c *checker) deploymentReady(ctx context.Context, ns, name string) error {
	what := fmt.Sprintf("deployment %s/%s", ns, name)
	d, err := c.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(what, err)
	}
	if d.Status.ObservedGeneration < d.Generation {
		return fmt.Errorf("%s: generation %d not yet observed by its controller", what, d.Generation)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.UpdatedReplicas < want:
		return fmt.Errorf("%s: %d/%d replicas updated", what, s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Errorf("%s: %d replicas of an older revision remain", what, s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < want:
		return fmt.Errorf("%s: %d/%d replicas available", what, s.AvailableReplicas, want)
	}
	return nil
}

func (c *checker) daemonSetReady(ctx context.Context, ns, name string) error {
	what := fmt.Sprintf("daemonset %s/%s", ns, name)
	d, err := c.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return notFound(what, err)
	}
	if d.Status.ObservedGeneration < d.Generation {
		return fmt.Errorf("%s: generation %d not yet observed by its controller", what, d.Generation)
	}
	s := d.Status
	switch {
	case s.DesiredNumberScheduled == 0:
		// Ready in Kubernetes' terms, but a gate on a DaemonSet means "it runs": no node for it
		// yet (nodes still registering) is not ready.
		return fmt.Errorf("%s: no pods desired yet (no eligible node)", what)
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return fmt.Errorf("%s: %d/%d pods updated", what, s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberReady < s.DesiredNumberScheduled:
		return fmt.Errorf("%s: %d/%d pods ready", what, s.NumberReady, s.DesiredNumberScheduled)
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return fmt.Errorf("%s: %d/%d pods available", what, s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return nil
}

// urlClient does not follow redirects: a 3xx is an answer, and passes.
var urlClient = &http.Client{
	Timeout:       urlTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func urlHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("url %s: %w", url, err)
	}
	resp, err := urlClient.Do(req)
	if err != nil {
		return fmt.Errorf("url %s: %w", url, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("url %s: %s", url, resp.Status)
	}
	return nil
}

// Labels of the scheduling probe's pods, so that an operator can find (and delete) a leftover.
var probeLabels = map[string]string{
	"app.kubernetes.io/managed-by": "kobe",
	"kobe.kunobi.ninja/probe":      "scheduling",
}

func (c *checker) schedulingProbe(ctx context.Context, ns string) error {
	what := "scheduling probe in " + ns
	noToken := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kobe-scheduling-probe-", Namespace: ns, Labels: probeLabels},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: "pause", Image: ProbeImage}},
			AutomountServiceAccountToken: &noToken,
			RestartPolicy:                corev1.RestartPolicyNever,
		},
	}
	pods := c.kube.CoreV1().Pods(ns)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: creating the pod: %w", what, err)
	}
	defer func() {
		// Force-delete (grace 0) even if ctx has ended: a probe pod must not outlive the check.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		zero := int64(0)
		_ = pods.Delete(dctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()

	deadline := time.Now().Add(scheduleTimeout)
	for {
		p, err := pods.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if p.Spec.NodeName != "" {
			return nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				// The scheduler has looked and said no: report it now, the next attempt
				// (a fresh pod) will see whether that changed.
				return fmt.Errorf("%s: unschedulable: %s", what, cond.Message)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not scheduled within %s", what, scheduleTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not scheduled yet", what)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *checker) dnsHealthy(ctx context.Context, ns string) error {
	if _, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		return notFound("dns: namespace "+ns, err)
	}
	var svc string
	for _, name := range []string{"kube-dns", "coredns"} {
		_, err := c.kube.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			svc = name
			break
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("dns: service kube-system/%s: %w", name, err)
		}
	}
	if svc == "" {
		return errors.New("dns: no kube-dns or coredns service in kube-system")
	}
	slices, err := c.kube.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	if err != nil {
		return fmt.Errorf("dns: endpoints of kube-system/%s: %w", svc, err)
	}
	total := 0
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			total++
			// A nil Ready means ready (the field's documented default).
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return nil
			}
		}
	}
	return fmt.Errorf("dns: service kube-system/%s: 0/%d endpoints ready", svc, total)
}

func (c *checker) inClusterToken(ctx context.Context, ns, sa string) error {
	what := fmt.Sprintf("serviceaccount %s/%s", ns, sa)
	if _, err := c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: not found (an addon must create it)", what)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	expiry := int64(600) // the shortest the API server issues
	tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: token request: %w", what, err)
	}
	// The token stays in this function: it is neither logged nor returned.
	review, err := c.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: token review: %w", what, err)
	}
	if !review.Status.Authenticated {
		return fmt.Errorf("%s: token not authenticated: %s", what, review.Status.Error)
	}
	want := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	if got := review.Status.User.Username; got != want {
		return fmt.Errorf("%s: token authenticated as %q, want %q", what, got, want)
	}
	return nil
}
