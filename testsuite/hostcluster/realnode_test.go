package hostcluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/internal/pki"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster/images"
)

// One real node serves every subtest (a node per machine at a time; starting one costs seconds).
// When the test ends the node is torn down and StartReal's cleanup fails the test if anything
// of it is left on the machine.
func TestRealNode(t *testing.T) {
	c := hostcluster.StartReal(t, hostcluster.RealOptions{FakeNodes: 2})
	t.Logf("real node ready in %s", c.Ready.Round(time.Millisecond))

	t.Run("kwok fake nodes beside the real node", func(t *testing.T) {
		nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
		sort.Strings(names)
		require.Equal(t, []string{c.NodeName, "kwok-node-0", "kwok-node-1"}, names)
	})
	t.Run("nothing is routed off the machine", func(t *testing.T) { testRoutes(t, c) })
	t.Run("a deployment with a readiness probe serves through its Service", func(t *testing.T) { testDeployment(t, c) })
	t.Run("a control-plane pod is reached through its Service with a client certificate", func(t *testing.T) { testControlPlanePod(t, c) })
	t.Run("deleting a namespace removes its pods' processes, netns and veths", func(t *testing.T) { testNamespaceDeletion(t, c) })
}

// The node adds routes for its pod subnet and Service range, both to its bridge; pods have no
// default route, so a pod cannot reach beyond this machine.
func testRoutes(t *testing.T, c *hostcluster.RealCluster) {
	before, now := c.RoutesBefore, hostcluster.Routes()
	var added []string
	for _, r := range now {
		if !contains(before, r) {
			added = append(added, r)
		}
	}
	// Every route the node added is on its bridge, or an IPv6 link-local route of a pod's veth
	// (which is on the bridge too).
	ports := c.BridgePorts()
	for _, r := range added {
		dev := routeDevice(r)
		if dev == "kobe0" {
			continue
		}
		require.Contains(t, ports, dev, "a route the node added is not on its bridge: %s", r)
		require.Regexp(t, `(fe80::|ff00::)`, r, "a route on a pod's veth that is not link-local: %s", r)
	}
	require.True(t, hasPrefix(added, c.PodSubnet+" dev kobe0"), "pod subnet route in %v", added)
	require.True(t, hasPrefix(added, c.ServiceCIDR+" dev kobe0"), "Service range route in %v", added)
	for _, r := range before {
		require.Contains(t, now, r, "the node removed a route of the machine")
	}
	out, err := exec.Command("ip", "route", "get", "10.96.77.200").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "dev kobe0", "a Service address goes to the bridge")

	ctx := context.Background()
	ns := namespace(t, c, "routes")
	pod := busyboxPod(ns, "probe", "sleep", "3600")
	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodReady(t, c, ns, "probe")
	out2, err := c.Kubectl("exec", "-n", ns, "probe", "--", "ip", "route")
	require.NoError(t, err, out2)
	t.Logf("routes in a pod:\n%s", out2)
	require.NotContains(t, out2, "default", "a pod has a default route")
	require.Contains(t, out2, c.ServiceCIDR)
	// An address beyond the machine is unreachable from a pod.
	out2, err = c.Kubectl("exec", "-n", ns, "probe", "--", "nc", "-w", "2", "192.0.2.1", "80")
	require.Error(t, err, "a pod reached 192.0.2.1: %s", out2)
	require.Contains(t, strings.ToLower(out2), "unreachable")
}

func testDeployment(t *testing.T, c *hostcluster.RealCluster) {
	ctx := context.Background()
	ns := namespace(t, c, "web")
	replicas := int32(2)
	grace := int64(1)
	labels := map[string]string{"app": "web"}
	_, err := c.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "web", Image: images.HTTPServerName, ImagePullPolicy: corev1.PullNever,
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t0 := time.Now()
	eventually(t, 3*time.Minute, "deployment web with 2 ready replicas", func() (bool, string) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == 2, fmt.Sprintf("%+v", d.Status)
	})
	t.Logf("deployment ready %s after create", time.Since(t0).Round(time.Millisecond))

	// From the host, through kube-proxy's rules for the ClusterIP.
	url := "http://" + svc.Spec.ClusterIP + "/"
	var body string
	eventually(t, time.Minute, "GET "+url+" from the host", func() (bool, string) {
		body, err = httpGet(url)
		return err == nil, fmt.Sprint(err)
	})
	require.Contains(t, body, "hello from web-")

	// From another pod: by the Service's DNS name when cluster DNS runs, else by its address.
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "client", Image: images.HTTPServerName, ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{{Name: "PORT", Value: "9090"}},
			}},
		},
	}
	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodReady(t, c, ns, "client")
	target := url
	if c.DNS {
		target = "http://web." + ns + ".svc.cluster.local/"
	} else {
		t.Logf("no CoreDNS built (run `make tools`): the pod calls the Service by its ClusterIP")
	}
	var out string
	eventually(t, time.Minute, "kubectl exec client -- /httpserver get "+target, func() (bool, string) {
		out, err = c.Kubectl("exec", "-n", ns, "client", "--", "/httpserver", "get", target)
		return err == nil, fmt.Sprintf("%v: %s", err, out)
	})
	require.Contains(t, out, "hello from web-", "answer through kubectl exec")
	t.Logf("from pod client: GET %s → %s", target, strings.TrimSpace(out))

	// kubectl logs: the servers logged the requests.
	eventually(t, time.Minute, "kubectl logs showing the request", func() (bool, string) {
		out, err = c.Kubectl("logs", "-n", ns, "-l", "app=web", "--tail=-1")
		return err == nil && strings.Contains(out, "request GET /"), fmt.Sprintf("%v: %s", err, out)
	})
	require.Contains(t, out, "serving on :8080")
}

// The shape vcluster and Kamaji run: kube-apiserver and kine in one pod, with certificates from
// a Secret, behind a ClusterIP Service; the host calls it with a client certificate of the
// pod's own CA.
func testControlPlanePod(t *testing.T, c *hostcluster.RealCluster) {
	ctx := context.Background()
	ns := namespace(t, c, "tenant")
	svc, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-api"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "tenant-api"},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(6443)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ip := svc.Spec.ClusterIP

	ca, err := pki.NewCA("tenant", time.Hour)
	require.NoError(t, err)
	serving, err := ca.IssueServing("tenant-api", []string{"tenant-api", "tenant-api." + ns, "tenant-api." + ns + ".svc", "localhost"},
		[]net.IP{net.ParseIP(ip), net.ParseIP("127.0.0.1")}, time.Hour)
	require.NoError(t, err)
	admin, err := ca.IssueClient("tenant-admin", []string{"system:masters"}, time.Hour)
	require.NoError(t, err)
	saPub, saKey, err := pki.NewSigningKey()
	require.NoError(t, err)
	_, err = c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-pki"},
		Data: map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM,
			"sa.pub": saPub, "sa.key": saKey},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	grace := int64(1)
	image := images.ControlPlaneName(c.KubernetesVersion)
	mount := []corev1.VolumeMount{{Name: "pki", MountPath: "/pki", ReadOnly: true}}
	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-api", Labels: map[string]string{"app": "tenant-api"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(bool),
			Volumes:                       []corev1.Volume{{Name: "pki", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tenant-pki"}}}},
			Containers: []corev1.Container{
				{
					Name: "kine", Image: image, ImagePullPolicy: corev1.PullNever,
					Command: []string{"kine", "--endpoint", "sqlite:///var/lib/kine/state.db?_journal=WAL&cache=shared&_busy_timeout=30000",
						"--listen-address", "127.0.0.1:2379", "--metrics-bind-address", "0"},
				},
				{
					Name: "kube-apiserver", Image: image, ImagePullPolicy: corev1.PullNever, VolumeMounts: mount,
					Command: []string{"kube-apiserver", "--etcd-servers=http://127.0.0.1:2379", "--storage-backend=etcd3",
						"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address=" + ip,
						"--client-ca-file=/pki/ca.crt", "--tls-cert-file=/pki/tls.crt", "--tls-private-key-file=/pki/tls.key",
						"--service-account-issuer=https://tenant-api", "--service-account-key-file=/pki/sa.pub",
						"--service-account-signing-key-file=/pki/sa.key", "--service-cluster-ip-range=10.43.0.0/24",
						"--authorization-mode=RBAC", "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false"},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(6443), Scheme: corev1.URISchemeHTTPS}},
						PeriodSeconds: 1, FailureThreshold: 300,
					},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t0 := time.Now()
	waitPodReady(t, c, ns, "tenant-api")
	t.Logf("control-plane pod ready %s after create", time.Since(t0).Round(time.Millisecond))

	tenant, err := kubernetes.NewForConfig(&rest.Config{
		Host:            "https://" + ip,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: admin.CertPEM, KeyData: admin.KeyPEM},
		Timeout:         10 * time.Second,
	})
	require.NoError(t, err)
	var version string
	eventually(t, time.Minute, "the tenant API's /version through its Service", func() (bool, string) {
		v, err := tenant.Discovery().ServerVersion()
		if err != nil {
			return false, err.Error()
		}
		version = v.GitVersion
		return true, ""
	})
	require.Equal(t, c.KubernetesVersion, version)
	_, err = tenant.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "inside"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	list, err := tenant.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	require.Contains(t, names, "inside")

	// Without a client certificate the tenant API refuses the request.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := anon.Get("https://" + ip + "/api/v1/namespaces")
	require.NoError(t, err)
	resp.Body.Close()
	require.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode)
}

func testNamespaceDeletion(t *testing.T, c *hostcluster.RealCluster) {
	ctx := context.Background()
	portsBefore, netnsBefore := c.BridgePorts(), c.NetworkNamespaces()
	const ns = "doomed"
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var uids []string
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("sleeper-%d", i)
		p, err := c.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod(ns, name, "sleep", "3600"), metav1.CreateOptions{})
		require.NoError(t, err)
		uids = append(uids, string(p.UID))
	}
	for i := range uids {
		waitPodReady(t, c, ns, fmt.Sprintf("sleeper-%d", i))
	}
	for _, uid := range uids {
		require.NotEmpty(t, c.PodProcesses(uid), "pod %s has processes on the node", uid)
	}
	require.Len(t, c.BridgePorts(), len(portsBefore)+2, "a veth per pod")
	require.Len(t, c.NetworkNamespaces(), len(netnsBefore)+2, "a network namespace per pod")

	require.NoError(t, c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 500*time.Millisecond, "namespace %s never went away", ns)
	eventually(t, 2*time.Minute, "the deleted pods' processes, veths and netns gone", func() (bool, string) {
		for _, uid := range uids {
			if ps := c.PodProcesses(uid); len(ps) > 0 {
				return false, fmt.Sprintf("pod %s still has processes %v", uid, ps)
			}
		}
		return equalSets(c.BridgePorts(), portsBefore) && equalSets(c.NetworkNamespaces(), netnsBefore),
			fmt.Sprintf("veths %v (before %v), netns %v (before %v)", c.BridgePorts(), portsBefore, c.NetworkNamespaces(), netnsBefore)
	})
}

func namespace(t *testing.T, c *hostcluster.RealCluster, name string) string {
	_, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Pods need the namespace's default ServiceAccount, which the controller-manager creates.
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 100*time.Millisecond)
	return name
}

func busyboxPod(ns, name string, command ...string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "main", Image: images.BusyboxName, ImagePullPolicy: corev1.PullNever, Command: command}},
		},
	}
}

func waitPodReady(t *testing.T, c *hostcluster.RealCluster, ns, name string) {
	t.Helper()
	eventually(t, 3*time.Minute, "pod "+ns+"/"+name+" Ready", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %+v, containers %+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	})
}

// eventually polls check until it holds; on timeout the test fails with the last state seen.
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %s", what, timeout, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func httpGet(url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	return string(body), err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func routeDevice(route string) string {
	f := strings.Fields(route)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	return ""
}

func hasPrefix(list []string, prefix string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, prefix) {
			return true
		}
	}
	return false
}

func equalSets(a, b []string) bool {
	a, b = append([]string{}, a...), append([]string{}, b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}
