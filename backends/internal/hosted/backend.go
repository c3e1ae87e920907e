package hosted

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/wait"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// HostKubeconfigEnv is the environment variable of a worker's --host-kubeconfig (the flag wins;
// the test harness, which starts workers without flags, sets the variable).
const HostKubeconfigEnv = "KOBE_HOST_KUBECONFIG"

// HostConfig finds the host cluster of the k3s, k0s and vcluster backends: the worker's
// --host-kubeconfig, else $KOBE_HOST_KUBECONFIG, else the in-cluster config. Without any, the
// string says why, and the backends refuse every spec with it.
func HostConfig(env backends.Environment) (*rest.Config, string) {
	path, from := env.HostKubeconfig, "--host-kubeconfig"
	if path == "" {
		path, from = os.Getenv(HostKubeconfigEnv), "$"+HostKubeconfigEnv
	}
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", from, err)
		}
		return cfg, ""
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, ""
	}
	return nil, "this worker has no host cluster (start it with --host-kubeconfig, or run it in the host cluster)"
}

// Config of a hosted backend.
type Config struct {
	// REST reaches the host cluster (nil: Unavailable says why).
	REST        *rest.Config
	Unavailable string
	// PollInterval of WaitReady and Delete (default 1 s).
	PollInterval time.Duration
	// APITimeout bounds one request of kobe's readiness probe to an instance's API (default 5 s).
	APITimeout time.Duration
}

// Backend runs instances of one distribution in one host cluster. It keeps no state of its
// own: every answer comes from the host cluster, so any worker with access to it serves any
// instance.
type Backend struct {
	distro      Distro
	unavailable string
	kube        kubernetes.Interface
	poll        time.Duration
	apiTimeout  time.Duration

	locks backends.InstanceLocks
}

var (
	_ backends.RuntimeBackend  = (*Backend)(nil)
	_ backends.Preflighter     = (*Backend)(nil)
	_ backends.GoldenTemplater = (*Backend)(nil)
	_ backends.LeasePreparer   = (*Backend)(nil)
)

// New makes a backend of a distribution (nothing is asked of the host until used).
func New(d Distro, cfg Config) (*Backend, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	b := &Backend{distro: d, poll: cfg.PollInterval, apiTimeout: cfg.APITimeout}
	if b.poll <= 0 {
		b.poll = time.Second
	}
	if b.apiTimeout <= 0 {
		b.apiTimeout = 5 * time.Second
	}
	if cfg.REST == nil {
		b.unavailable = cfg.Unavailable
		if b.unavailable == "" {
			b.unavailable = "no host cluster config"
		}
		return b, nil
	}
	rc := rest.CopyConfig(cfg.REST)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", d.Name, err)
	}
	b.kube = kube
	return b, nil
}

// Prototype is a backend value for the capability matrix.
func Prototype(d Distro) *Backend { return &Backend{distro: d} }

// Name implements backends.RuntimeBackend.
func (b *Backend) Name() string { return b.distro.Name }

func (b *Backend) available() error {
	if b.kube == nil {
		why := b.unavailable
		if why == "" {
			why = "no host cluster config"
		}
		return fmt.Errorf("%s backend: %s", b.distro.Name, why)
	}
	return nil
}

// Validate implements backends.RuntimeBackend: the spec alone, no host cluster needed.
func (b *Backend) Validate(spec backends.InstanceSpec) error {
	_, _, err := b.validate(spec)
	return err
}

func (b *Backend) section() string { return "spec.backend." + b.distro.Name }

func (b *Backend) validate(spec backends.InstanceSpec) (Parsed, string, error) {
	// The Service is named <id> (a DNS-1035 label: it starts with a letter), the StatefulSets
	// <id>-server and <id>-agent (at most 52 characters, so that their pods' revision label fits).
	if !dnsLabel.MatchString(spec.ID) || len(spec.ID) > MaxIDLength || spec.ID[0] < 'a' || spec.ID[0] > 'z' {
		return Parsed{}, "", backends.InvalidSpec(fmt.Errorf("instance id %q: must be a DNS label of at most %d characters starting with a letter (it names the instance's Service; pool names that start with a digit cannot run on %s)", spec.ID, MaxIDLength, b.distro.Name))
	}
	image, err := b.distro.Image(spec.KubernetesVersion)
	if err != nil {
		return Parsed{}, "", backends.InvalidSpec(err)
	}
	p, err := ParseOptions(b.section(), spec.Options)
	if err != nil {
		return p, "", backends.InvalidSpec(err)
	}
	if p.Image != "" {
		image = p.Image
	}
	if p.Agents > 0 && b.distro.AgentCommand == nil {
		return p, "", backends.InvalidSpec(fmt.Errorf("spec.cluster.agents: %s agents are not supported by this version of kobe (use agents: 0)", b.distro.Name))
	}
	if b.distro.Unsupported != nil {
		if err := b.distro.Unsupported(p); err != nil {
			return p, "", backends.InvalidSpec(err)
		}
	}
	return p, image, nil
}

// Preflight implements backends.Preflighter: what needs the host cluster, without side
// effects: the namespace exists, a fixed NodePort is free, and the host accepts every object
// of the instance (server-side dry-run: schemas, defaults, admission such as Pod Security).
func (b *Backend) Preflight(ctx context.Context, spec backends.InstanceSpec) error {
	p, image, err := b.validate(spec)
	if err != nil {
		return err
	}
	if err := b.available(); err != nil {
		return err
	}
	return b.preflight(ctx, spec, p, image)
}

// preflight: the namespace exists, a fixed NodePort is free, and the host accepts every
// object of the instance (server-side dry-run).
func (b *Backend) preflight(ctx context.Context, spec backends.InstanceSpec, p Parsed, image string) error {
	if _, err := b.kube.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return backends.InvalidSpec(fmt.Errorf("%s.namespace: the host cluster has no namespace %q", b.section(), p.Namespace))
		}
		return fmt.Errorf("host cluster: %w", err)
	}
	if p.ExposeType == ExposeNodePort && p.Cluster.Expose.NodePort != nil {
		want := *p.Cluster.Expose.NodePort
		svcs, err := b.kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("host cluster: %w", err)
		}
		for _, s := range svcs.Items {
			for _, port := range s.Spec.Ports {
				if port.NodePort == want {
					return backends.InvalidSpec(fmt.Errorf("spec.cluster.expose.nodePort: %d is taken by Service %s/%s of the host cluster", want, s.Namespace, s.Name))
				}
			}
		}
	}
	if err := b.preflightDatastore(ctx, p); err != nil {
		return err
	}
	ca, err := b.createCA(ctx, spec, p, true)
	if err != nil {
		return err
	}
	return b.createObjects(ctx, spec, p, image, ca, dryRunEndpoint(p), true)
}

// dryRunEndpoint stands for the instance's own datastore URL in a dry-run (none is made).
func dryRunEndpoint(p Parsed) string {
	if p.SharedDatastore == nil {
		return ""
	}
	return "postgres://dry-run:dry-run@dry-run:5432/dry-run"
}

// Create implements backends.RuntimeBackend. Every object is created if absent, so a retry
// after a crash completes what the first call began, and a second Create of a whole instance
// changes nothing. The CA Secret comes first and owns every other object: whatever happens
// to kobe, deleting it lets the host's garbage collector remove the rest.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.InstanceStatus, error) {
	p, image, err := b.validate(spec)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	if err := b.available(); err != nil {
		return backends.InstanceStatus{}, err
	}
	defer b.locks.Lock(spec.ID)()
	ca, err := b.findCA(ctx, spec.ID)
	fresh := errors.Is(err, backends.ErrNotFound)
	if fresh {
		// Only a new instance is judged against the host.
		if err := b.preflight(ctx, spec, p, image); err != nil {
			return backends.InstanceStatus{}, err
		}
		ca, err = b.createCA(ctx, spec, p, false)
	}
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	p.Namespace = ca.Namespace
	// The database before the servers that use it.
	endpoint, err := b.ensureDatabase(ctx, spec, p, ca, fresh)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	if err := b.createObjects(ctx, spec, p, image, ca, endpoint, false); err != nil {
		return backends.InstanceStatus{}, err
	}
	return b.statusOf(ctx, ca), nil
}

// createObjects creates (or, with dryRun, has the host check without keeping) every object of
// the instance after its CA Secret (and its database): the token Secret, the datastore Secret
// (dry-run only: Create makes it with the database), the Service, the configuration, the
// StatefulSets and the PodDisruptionBudget. endpoint is the instance's own datastore URL ("":
// embedded datastore).
func (b *Backend) createObjects(ctx context.Context, spec backends.InstanceSpec, p Parsed, image string, ca *corev1.Secret, endpoint string, dryRun bool) error {
	d := b.distro
	ns := p.Namespace
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var owner []metav1.OwnerReference
	if !dryRun { // a dry-run CA has no UID to own anything
		owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: ca.Name, UID: ca.UID}}
	}
	refused := func(kind, name string, err error) error {
		if dryRun && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)) {
			return backends.InvalidSpec(fmt.Errorf("the host cluster refuses the %s %s/%s: %v", kind, ns, name, err))
		}
		return fmt.Errorf("creating %s %s/%s: %w", kind, ns, name, err)
	}
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tokenSecretName(spec.ID), Namespace: ns, Labels: labels(d, spec.ID, spec.Pool, ComponentToken), OwnerReferences: owner},
		Data:       map[string][]byte{"token": []byte(randomHex(32))},
	}
	if _, err := b.kube.CoreV1().Secrets(ns).Create(ctx, token, opts); err != nil && !apierrors.IsAlreadyExists(err) {
		return refused("Secret", token.Name, err)
	}
	if dryRun && endpoint != "" {
		ds := renderDatastoreSecret(d, spec.ID, spec.Pool, ns, endpoint)
		if _, err := b.kube.CoreV1().Secrets(ns).Create(ctx, ds, opts); err != nil {
			return refused("Secret", ds.Name, err)
		}
	}
	svc := renderService(d, spec.ID, spec.Pool, p)
	svc.OwnerReferences = owner
	got, err := b.kube.CoreV1().Services(ns).Create(ctx, svc, opts)
	if apierrors.IsAlreadyExists(err) && !dryRun {
		got, err = b.kube.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
	}
	if err != nil {
		return refused("Service", svc.Name, err)
	}
	var extra []string
	switch {
	case p.ExposeType == ExposeNodePort:
		if extra, err = b.nodeAddresses(ctx); err != nil {
			return err
		}
	case p.ExposeType == ExposeLoadBalancer && !dryRun:
		// The servers' certificate names the load balancer's address, which the host's
		// load-balancer controller gives the Service: the servers wait for it.
		if extra, err = b.loadBalancerAddresses(ctx, ns, svc.Name); err != nil {
			return err
		}
	}
	in := ServerInput{
		ID: spec.ID, Namespace: ns, SANs: sans(spec.ID, ns, got.Spec.ClusterIP, extra),
		ServiceName: svc.Name, ServerURL: fmt.Sprintf("https://%s.%s.svc:%d", svc.Name, ns, APIPort),
		TokenFile: TokenDir + "/token", Options: p, DatastoreEndpoint: endpoint,
	}
	cfg, err := renderConfig(d, spec.ID, spec.Pool, in)
	if err != nil {
		return err
	}
	if cfg != nil {
		cfg.OwnerReferences = owner
		if _, err := b.kube.CoreV1().Secrets(ns).Create(ctx, cfg, opts); err != nil && !apierrors.IsAlreadyExists(err) {
			return refused("Secret", cfg.Name, err)
		}
	}
	for _, set := range []*appsv1.StatefulSet{renderServers(d, spec.ID, spec.Pool, image, in), renderAgents(d, spec.ID, spec.Pool, image, in)} {
		if set == nil {
			continue
		}
		set.OwnerReferences = owner
		if _, err := b.kube.AppsV1().StatefulSets(ns).Create(ctx, set, opts); err != nil && !apierrors.IsAlreadyExists(err) {
			return refused("StatefulSet", set.Name, err)
		}
	}
	if pdb := renderPDB(d, spec.ID, spec.Pool, p); pdb != nil {
		pdb.OwnerReferences = owner
		if _, err := b.kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, opts); err != nil && !apierrors.IsAlreadyExists(err) {
			return refused("PodDisruptionBudget", pdb.Name, err)
		}
	}
	return nil
}

// createCA makes the instance's CA and stores it as the instance's first object.
func (b *Backend) createCA(ctx context.Context, spec backends.InstanceSpec, p Parsed, dryRun bool) (*corev1.Secret, error) {
	ca, err := pki.NewCA(b.distro.Name+"-"+spec.ID, caValidity)
	if err != nil {
		return nil, err
	}
	lbl := labels(b.distro, spec.ID, spec.Pool, ComponentCA)
	// What the instance was created from, so Status can tell the servers and agents to expect.
	sh := instanceShape{Servers: p.Servers, Agents: p.Agents, ExposeType: p.ExposeType}
	if p.SharedDatastore != nil {
		sh.Datastore = &datastoreRef{SecretRef: p.SharedDatastore.SecretRef, SecretKey: p.SharedDatastore.Key()}
		sh.Template = templateOf(spec, p)
	}
	shape, _ := json.Marshal(sh)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: caSecretName(spec.ID), Namespace: p.Namespace, Labels: lbl,
			Annotations: map[string]string{shapeAnnotation: string(shape)}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM},
	}
	if b.distro.ServiceAccountKeyFiles != nil {
		pub, priv, err := pki.NewSigningKey()
		if err != nil {
			return nil, err
		}
		s.Data[saKeyKey], s.Data[saPubKey] = priv, pub
	}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := b.kube.CoreV1().Secrets(p.Namespace).Create(ctx, s, opts)
	if apierrors.IsAlreadyExists(err) {
		got, err = b.kube.CoreV1().Secrets(p.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err == nil && got.Labels[LabelInstance] != spec.ID {
			return nil, backends.InvalidSpec(fmt.Errorf("a Secret %s/%s exists that kobe did not create", p.Namespace, s.Name))
		}
	}
	if err != nil {
		if dryRun && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)) {
			return nil, backends.InvalidSpec(fmt.Errorf("the host cluster refuses the Secret %s/%s: %v", p.Namespace, s.Name, err))
		}
		return nil, fmt.Errorf("creating Secret %s/%s: %w", p.Namespace, s.Name, err)
	}
	return got, nil
}

// MaxIDLength of an instance id: <id>-server is a StatefulSet name, at most 52 characters.
const MaxIDLength = 45

// caValidity of an instance's CA; instances are ephemeral, but a pool member may wait warm
// for long.
const caValidity = 10 * 365 * 24 * time.Hour

const shapeAnnotation = "kobe.kunobi.ninja/shape"

type instanceShape struct {
	Servers    int    `json:"servers"`
	Agents     int    `json:"agents"`
	ExposeType string `json:"exposeType"`
	// Datastore: the instance has a database on a shared datastore (dropped at Delete).
	Datastore *datastoreRef `json:"datastore,omitempty"`
	// Template: the golden template the instance's database was copied from (its pool's
	// templates are dropped with the last such member).
	Template string `json:"template,omitempty"`
}

func (b *Backend) nodeAddresses(ctx context.Context) ([]string, error) {
	nodes, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the host's nodes (NodePort addresses): %w", err)
	}
	var out []string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				out = append(out, a.Address)
			}
		}
	}
	return out, nil
}

// loadBalancerAddresses waits until the host gives the Service its load balancer's addresses
// (IPs or host names), or ctx ends.
func (b *Backend) loadBalancerAddresses(ctx context.Context, ns, name string) ([]string, error) {
	for {
		svc, err := b.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("Service %s/%s: %w", ns, name, err)
		}
		if addrs := lbAddresses(svc); len(addrs) > 0 {
			return addrs, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("Service %s/%s (type LoadBalancer) got no load balancer address: does the host cluster run a load-balancer controller? %w", ns, name, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}

func lbAddresses(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	return out
}

// findCA finds an instance's CA Secret (its anchor) by label, in any namespace.
func (b *Backend) findCA(ctx context.Context, id string) (*corev1.Secret, error) {
	list, err := b.kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: LabelInstance + "=" + id + "," + LabelComponent + "=" + ComponentCA + "," + LabelBackend + "=" + b.distro.Name})
	if err != nil {
		return nil, fmt.Errorf("host cluster: listing Secrets: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			return &list.Items[i], nil
		}
	}
	return nil, backends.ErrNotFound
}

// Status implements backends.RuntimeBackend.
func (b *Backend) Status(ctx context.Context, id string) (backends.InstanceStatus, error) {
	if err := b.available(); err != nil {
		return backends.InstanceStatus{}, err
	}
	ca, err := b.findCA(ctx, id)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	return b.statusOf(ctx, ca), nil
}

// statusOf: Ready = every server and agent pod Ready and the instance's own API answering
// /readyz at the endpoint kobe hands out, with kobe's admin credential. On the way, the first
// stage not reached gives the message, with a stable reason code.
func (b *Backend) statusOf(ctx context.Context, ca *corev1.Secret) backends.InstanceStatus {
	id := ca.Labels[LabelInstance]
	st := backends.InstanceStatus{ID: id, Phase: backends.PhaseCreating, CreatedAt: ca.CreationTimestamp.Time.UTC()}
	_, seenReady := ca.Annotations[readyAnnotation]
	notReady := func(reason, format string, args ...any) backends.InstanceStatus {
		st.Message = reason + ": " + fmt.Sprintf(format, args...)
		if seenReady && st.Phase != backends.PhaseFailed {
			st.Phase = backends.PhaseUnhealthy
		}
		return st
	}
	shape := shapeOf(ca)
	if since, asleep := ca.Annotations[sleepingAnnotation]; asleep {
		// Scaled to 0 on purpose (Sleep): its endpoint stays what it was, where it can be told.
		st.Phase, st.Message = backends.PhaseSleeping, "asleep since "+since
		st.Endpoint, _ = b.endpoint(ctx, ca, shape)
		return st
	}
	endpoint, err := b.endpoint(ctx, ca, shape)
	if err != nil {
		return notReady(b.distro.Name+"_service_pending", "%v", err)
	}
	st.Endpoint = endpoint
	pods, err := b.kube.CoreV1().Pods(ca.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInstance + "=" + id})
	if err != nil {
		return notReady(b.distro.Name+"_host_unreachable", "listing pods: %v", err)
	}
	for _, c := range []struct {
		component string
		want      int
	}{{ComponentServer, shape.Servers}, {ComponentAgent, shape.Agents}} {
		if c.want == 0 {
			continue
		}
		ready, why := 0, []string{}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Labels[LabelComponent] != c.component {
				continue
			}
			if podReady(pod) {
				ready++
				continue
			}
			reason, failed := podProblem(pod)
			if failed && !seenReady {
				st.Phase = backends.PhaseFailed
			}
			why = append(why, pod.Name+": "+reason)
		}
		if ready < c.want {
			sort.Strings(why)
			detail := ""
			if len(why) > 0 {
				detail = " (" + strings.Join(why, "; ") + ")"
			}
			return notReady(fmt.Sprintf("%s_%ss_starting", b.distro.Name, c.component), "%d/%d %s pods Ready%s", ready, c.want, c.component, detail)
		}
	}
	if err := b.probeAPI(ctx, ca, endpoint, ""); err != nil {
		return notReady(b.distro.Name+"_api_not_answering", "%s: %v", endpoint, err)
	}
	if shape.Servers > 1 {
		// The Service reaches one server per connection: each is asked at its own address, so
		// that Ready means every server serves (a server's port opens before its API does).
		for i := 0; i < shape.Servers; i++ {
			name := serverPodName(id, i)
			var ip string
			for j := range pods.Items {
				if pods.Items[j].Name == name {
					ip = pods.Items[j].Status.PodIP
				}
			}
			addr := "https://" + net.JoinHostPort(ip, strconv.Itoa(APIPort))
			if err := b.probeAPI(ctx, ca, addr, serviceDNSName(id, ca.Namespace)); err != nil {
				return notReady(b.distro.Name+"_api_not_answering", "server %s at %s: %v", name, addr, err)
			}
		}
	}
	st.Phase, st.Message = backends.PhaseReady, ""
	if !seenReady {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{readyAnnotation: time.Now().UTC().Format(time.RFC3339)}}})
		// Best effort: without the mark a later outage reads as Creating, not Unhealthy.
		_, _ = b.kube.CoreV1().Secrets(ca.Namespace).Patch(ctx, ca.Name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	}
	return st
}

func podReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podProblem says why a pod is not Ready, and whether waiting cannot help: its image is not
// available, or a container keeps crashing (a bad server argument).
func podProblem(pod *corev1.Pod) (string, bool) {
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "InvalidImageName", "ImagePullBackOff", "ErrImagePull":
				return fmt.Sprintf("%s %s: %s", cs.Name, w.Reason, w.Message), true
			case "CrashLoopBackOff":
				last := ""
				if t := cs.LastTerminationState.Terminated; t != nil {
					last = fmt.Sprintf(", last exit %d: %s", t.ExitCode, lastLines(t.Message, 3))
				}
				return fmt.Sprintf("%s restarted %d times%s", cs.Name, cs.RestartCount, last), cs.RestartCount >= 3
			case "":
			default:
				return cs.Name + " " + w.Reason, false
			}
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return "not scheduled: " + c.Message, false
			}
		}
	}
	return string(pod.Status.Phase), false
}

// endpoint is the address kobe hands out: the Service's ClusterIP (reachable from pods of the
// host, and from a host that routes the Service range), or a node's address and the NodePort.
func (b *Backend) endpoint(ctx context.Context, ca *corev1.Secret, shape instanceShape) (string, error) {
	id := ca.Labels[LabelInstance]
	svc, err := b.kube.CoreV1().Services(ca.Namespace).Get(ctx, serviceName(id), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("Service %s/%s: %w", ca.Namespace, serviceName(id), err)
	}
	if shape.ExposeType == ExposeLoadBalancer {
		addrs := lbAddresses(svc)
		if len(addrs) == 0 {
			return "", errors.New("no load balancer address yet")
		}
		return "https://" + net.JoinHostPort(addrs[0], strconv.Itoa(APIPort)), nil
	}
	if shape.ExposeType == ExposeNodePort {
		if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
			return "", errors.New("no node port allocated yet")
		}
		pod, err := b.kube.CoreV1().Pods(ca.Namespace).Get(ctx, serverPodName(id, 0), metav1.GetOptions{})
		if err != nil || pod.Status.HostIP == "" {
			return "", errors.New("the first server has no node yet")
		}
		return "https://" + net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(int(svc.Spec.Ports[0].NodePort))), nil
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" {
		return "", errors.New("no ClusterIP yet")
	}
	return "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(APIPort)), nil
}

// WaitReady implements backends.RuntimeBackend. Creating and Unhealthy are waited through;
// Failed ends the wait.
func (b *Backend) WaitReady(ctx context.Context, id string, progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return wait.Ready(ctx, id, b.poll, b.Status, progress)
}

// Delete implements backends.RuntimeBackend: deletes every object labelled with the instance
// (StatefulSets, their pods and claims, the Service, the PodDisruptionBudget, ConfigMaps, the
// Secrets, the CA last) and returns once none is left, or ctx ends.
func (b *Backend) Delete(ctx context.Context, id string) error {
	if err := b.available(); err != nil {
		return err
	}
	defer b.locks.Lock(id)()
	sel := metav1.ListOptions{LabelSelector: LabelInstance + "=" + id + "," + LabelBackend + "=" + b.distro.Name}
	if err := b.markDeleting(ctx, id); err != nil {
		return fmt.Errorf("deleting instance %s: %w", id, err)
	}
	for {
		left, err := b.deleteRound(ctx, id, sel)
		if err == nil && len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("still there: %s", strings.Join(left, ", "))
			}
			return fmt.Errorf("deleting instance %s: %v: %w", id, err, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}

// deleteRound deletes what is left of an instance and says what was still there.
func (b *Backend) deleteRound(ctx context.Context, id string, sel metav1.ListOptions) ([]string, error) {
	left, err := b.leftovers(ctx, sel)
	if err != nil || len(left) == 0 {
		return nil, err
	}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	grace := int64(1)
	podOpts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	onlyCA := true
	for _, o := range left {
		if !strings.HasPrefix(o.kind, "Secret") || o.component != ComponentCA {
			onlyCA = false
		}
	}
	if onlyCA {
		// Every server is gone: the instance's database goes before its anchor, which says
		// where it is (a failure keeps the CA, and the next round or Delete tries again).
		ca, err := b.findCA(ctx, id)
		if err == nil {
			if err := b.dropDatabase(ctx, ca); err != nil {
				return nil, err
			}
			if err := b.dropGoldenIfLast(ctx, ca); err != nil {
				return nil, fmt.Errorf("instance %s: dropping its pool's golden templates: %w", id, err)
			}
		} else if !errors.Is(err, backends.ErrNotFound) {
			return nil, err
		}
	}
	for _, o := range left {
		if o.deleting {
			continue
		}
		var err error
		switch o.kind {
		case "StatefulSet":
			err = b.kube.AppsV1().StatefulSets(o.ns).Delete(ctx, o.name, opts)
		case "Pod":
			err = b.kube.CoreV1().Pods(o.ns).Delete(ctx, o.name, podOpts)
		case "PersistentVolumeClaim":
			err = b.kube.CoreV1().PersistentVolumeClaims(o.ns).Delete(ctx, o.name, opts)
		case "Service":
			err = b.kube.CoreV1().Services(o.ns).Delete(ctx, o.name, opts)
		case "PodDisruptionBudget":
			err = b.kube.PolicyV1().PodDisruptionBudgets(o.ns).Delete(ctx, o.name, opts)
		case "ConfigMap":
			err = b.kube.CoreV1().ConfigMaps(o.ns).Delete(ctx, o.name, opts)
		case "Secret":
			// The CA last: while anything else remains, it keeps the instance findable (a Delete
			// interrupted here is finished by the next one).
			if o.component == ComponentCA && !onlyCA {
				continue
			}
			err = b.kube.CoreV1().Secrets(o.ns).Delete(ctx, o.name, opts)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting %s %s/%s: %w", o.kind, o.ns, o.name, err)
		}
	}
	return names(left), nil
}

type hostObject struct {
	kind, ns, name, component string
	deleting                  bool
}

func names(objs []hostObject) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = fmt.Sprintf("%s %s/%s", o.kind, o.ns, o.name)
	}
	sort.Strings(out)
	return out
}

// Leftovers lists every object of the host cluster that carries the instance's label, in any
// namespace: empty once Delete is done.
func (b *Backend) Leftovers(ctx context.Context, id string) ([]string, error) {
	if err := b.available(); err != nil {
		return nil, err
	}
	left, err := b.leftovers(ctx, metav1.ListOptions{LabelSelector: LabelInstance + "=" + id})
	return names(left), err
}

func (b *Backend) leftovers(ctx context.Context, sel metav1.ListOptions) ([]hostObject, error) {
	var out []hostObject
	add := func(kind string, m metav1.Object) {
		out = append(out, hostObject{kind: kind, ns: m.GetNamespace(), name: m.GetName(), component: m.GetLabels()[LabelComponent], deleting: m.GetDeletionTimestamp() != nil})
	}
	all := metav1.NamespaceAll
	sets, err := b.kube.AppsV1().StatefulSets(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	for i := range sets.Items {
		add("StatefulSet", &sets.Items[i])
	}
	pods, err := b.kube.CoreV1().Pods(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing Pods: %w", err)
	}
	for i := range pods.Items {
		add("Pod", &pods.Items[i])
	}
	pvcs, err := b.kube.CoreV1().PersistentVolumeClaims(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumeClaims: %w", err)
	}
	for i := range pvcs.Items {
		add("PersistentVolumeClaim", &pvcs.Items[i])
	}
	svcs, err := b.kube.CoreV1().Services(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	for i := range svcs.Items {
		add("Service", &svcs.Items[i])
	}
	pdbs, err := b.kube.PolicyV1().PodDisruptionBudgets(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	for i := range pdbs.Items {
		add("PodDisruptionBudget", &pdbs.Items[i])
	}
	cms, err := b.kube.CoreV1().ConfigMaps(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for i := range cms.Items {
		add("ConfigMap", &cms.Items[i])
	}
	secrets, err := b.kube.CoreV1().Secrets(all).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("listing Secrets: %w", err)
	}
	for i := range secrets.Items {
		add("Secret", &secrets.Items[i])
	}
	return out, nil
}

// InstanceIDs lists the instances of this backend in the host cluster (a test harness deletes
// what a test left).
func (b *Backend) InstanceIDs(ctx context.Context) ([]string, error) {
	if err := b.available(); err != nil {
		return nil, err
	}
	list, err := b.kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: LabelComponent + "=" + ComponentCA + "," + LabelBackend + "=" + b.distro.Name})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range list.Items {
		ids = append(ids, s.Labels[LabelInstance])
	}
	sort.Strings(ids)
	return ids, nil
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(buf)
}

// lastLines is the end of a termination message (a log tail), on one line.
func lastLines(msg string, n int) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
