// Package vcluster is kobe's density backend: an instance is a vcluster (the upstream chart
// and syncer of github.com/loft-sh/vcluster) installed with the Helm Go SDK into a namespace
// of its own in a host cluster (a worker's --host-kubeconfig, or the in-cluster
// config of a worker running in it). The virtual cluster's API server, controller manager
// and datastore run in one pod; its pods are synced into the namespace and run on the host's
// nodes.
//
// The values the chart is installed with are, merged in this order: kobe's (BuiltinValues:
// what kobe relies on), the operator's ($KOBE_VCLUSTER_VALUES), the pool's
// (spec.backend.vcluster.values). Ready is the control-plane pod Ready plus the kubeconfig
// Secret the syncer writes; the kubeconfig is rewritten to the address of the vcluster's
// Service. Delete is helm uninstall plus the namespace's deletion, verified: no namespace, no
// release Secrets, no cluster-scoped object of the instance (Leftovers).
package vcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/backends/internal/hosted"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/internal/wait"
	"github.com/kunobi-ninja/kobe/backends/local"
)

// Name is spec.backend.type for this backend.
const Name = "vcluster"

// Environment of the workers that run the backend.
const (
	// ChartEnv is the operator's chart source (default: the chart `make tools` put in
	// $KOBE_TOOLS_DIR); ChartVersionEnv its pinned version.
	ChartEnv        = "KOBE_VCLUSTER_CHART"
	ChartVersionEnv = "KOBE_VCLUSTER_CHART_VERSION"
	// ValuesEnv names a YAML file of the operator's values, merged over kobe's.
	ValuesEnv = "KOBE_VCLUSTER_VALUES"
)

// Labels kobe puts on an instance's namespace.
const (
	LabelInstance = "kobe.kunobi.ninja/instance"
	LabelPool     = "kobe.kunobi.ninja/pool"
	LabelBackend  = "kobe.kunobi.ninja/backend"
)

// readyAnnotation marks a namespace whose vcluster kobe once saw Ready: afterwards an instance
// that is not Ready is Unhealthy (it worked, now it does not), before it is still Creating.
const readyAnnotation = "kobe.kunobi.ninja/ready-at"

// NamespacePrefix + instance id is an instance's host namespace.
const NamespacePrefix = "kobe-vcluster-"

// Namespace is the host namespace of an instance.
func Namespace(id string) string { return NamespacePrefix + id }

func init() {
	backends.Register(backends.Factory{
		Name:        Name,
		Description: "vcluster: the upstream chart and syncer, one namespace per instance in a host cluster (Helm SDK)",
		New: func(env backends.Environment) (backends.RuntimeBackend, error) {
			cfg, why := hosted.HostConfig(env)
			if cfg == nil {
				return &Backend{unavailable: why}, nil
			}
			c, err := ConfigFromEnvironment(cfg, env.StateDir)
			if err != nil {
				return &Backend{unavailable: err.Error()}, nil
			}
			return New(c)
		},
		Prototype: &Backend{},
		Traits:    backends.Traits{HostCluster: true, PreparedCredentials: true},
	})
}

// Config configures the backend.
type Config struct {
	// REST reaches the host cluster, with rights to create namespaces and what the chart
	// installs (RBAC included).
	REST *rest.Config
	// Chart is the default chart source (see Options.Chart) and ChartVersion its version.
	Chart, ChartVersion string
	// Values are the operator's values, merged over BuiltinValues.
	Values map[string]any
	// StateDir keeps Helm's repository cache (default: a folder in the temporary directory).
	StateDir string
	// PollInterval of WaitReady and Delete (default 2 s).
	PollInterval time.Duration
}

// ToolsChart is the chart (and its version) `make tools` (hack/build-vcluster-tools.sh) put
// in a tools directory; empty when it was not built.
func ToolsChart(toolsDir string) (dir, version string) {
	f, err := os.Open(filepath.Join(toolsDir, "versions.env"))
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		switch k {
		case "VCLUSTER_CHART_DIR":
			dir = v
		case "VCLUSTER_VERSION":
			version = strings.TrimPrefix(v, "v")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return "", ""
	}
	return dir, version
}

// ConfigFromEnvironment reads the operator's settings ($KOBE_VCLUSTER_CHART,
// $KOBE_VCLUSTER_CHART_VERSION, $KOBE_VCLUSTER_VALUES; the tools' chart by default).
func ConfigFromEnvironment(rc *rest.Config, stateDir string) (Config, error) {
	c := Config{REST: rc, Chart: os.Getenv(ChartEnv), ChartVersion: os.Getenv(ChartVersionEnv)}
	if stateDir != "" {
		c.StateDir = filepath.Join(stateDir, "vcluster-helm")
	}
	if c.Chart == "" {
		dir, version := ToolsChart(local.DefaultToolsDir())
		if dir == "" {
			return c, fmt.Errorf("no chart: set $%s (an oci:// reference, an https:// repository or a chart directory), or run `make tools`", ChartEnv)
		}
		c.Chart = dir
		if c.ChartVersion == "" {
			c.ChartVersion = version
		}
	}
	if path := os.Getenv(ValuesEnv); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("$%s: %w", ValuesEnv, err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return c, fmt.Errorf("$%s (%s): %w", ValuesEnv, path, yamlError(err))
		}
		c.Values = v
	}
	return c, nil
}

// BuiltinValues are what kobe's handling of the instance relies on, under the operator's and
// the pool's values:
//   - the OSS syncer image `make tools` builds (kobe.local/vcluster, tag = chart version);
//     upstream defaults to the pro image;
//   - the distro image (the kubernetes binaries the init container copies to /binaries) that
//     `make tools` builds (kobe.local/vcluster-kubernetes; tag = spec.cluster.version);
//   - no telemetry;
//   - the controller manager's controllers without -cloud-node-lifecycle, which the chart
//     passes and kube-controller-manager 1.37 refuses (extraArgs replace flags by name).
//
// Exported for kobe's Helm chart test (deploy/helm), which renders the vcluster chart with them
// to check that a worker's RBAC rules cover what the release creates and grants.
func BuiltinValues() map[string]any {
	return map[string]any{
		"telemetry": map[string]any{"enabled": false},
		"controlPlane": map[string]any{
			"statefulSet": map[string]any{
				"image":           map[string]any{"registry": "kobe.local", "repository": "vcluster"},
				"imagePullPolicy": "IfNotPresent",
			},
			"distro": map[string]any{"k8s": map[string]any{
				"image":           map[string]any{"registry": "kobe.local", "repository": "vcluster-kubernetes"},
				"imagePullPolicy": "IfNotPresent",
				"controllerManager": map[string]any{
					"extraArgs": []any{"--controllers=*,-nodeipam,-nodelifecycle,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ttl"},
				},
			}},
		},
	}
}

// Backend manages vclusters in one host cluster. It keeps no state of its own: every answer
// comes from the host cluster (namespaces, Helm release Secrets, pods), so any worker can
// serve any instance.
type Backend struct {
	unavailable string // why there is no host cluster; empty when there is one

	cfg  Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	disc discovery.CachedDiscoveryInterface
	helm *helmClient
	poll time.Duration

	locks backends.InstanceLocks // Create/Delete per id
}

var (
	_ backends.RuntimeBackend    = (*Backend)(nil)
	_ backends.Preflighter       = (*Backend)(nil)
	_ backends.SyncErrorReporter = (*Backend)(nil)
	_ backends.LeasePreparer     = (*Backend)(nil)
)

// New connects the backend to a host cluster (lazily: nothing is asked until used).
func New(cfg Config) (*Backend, error) {
	if cfg.REST == nil {
		return nil, errors.New("vcluster backend: no host cluster config")
	}
	if cfg.Chart == "" {
		return nil, errors.New("vcluster backend: no default chart")
	}
	if _, err := sourceKind(cfg.Chart); err != nil {
		return nil, fmt.Errorf("vcluster backend: chart %w", err)
	}
	rc := rest.CopyConfig(cfg.REST)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	rc.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("vcluster backend: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("vcluster backend: %w", err)
	}
	disc, err := newDiscovery(rc)
	if err != nil {
		return nil, fmt.Errorf("vcluster backend: %w", err)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "kobe-vcluster-helm")
	}
	h, err := newHelmClient(rc, disc, cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("vcluster backend: %w", err)
	}
	b := &Backend{cfg: cfg, kube: kube, dyn: dyn, disc: disc, helm: h, poll: cfg.PollInterval}
	if b.poll <= 0 {
		b.poll = 2 * time.Second
	}
	return b, nil
}

// Name implements backends.RuntimeBackend.
func (b *Backend) Name() string { return Name }

// idPattern: the id names the release, its Service and StatefulSet (DNS-1035 labels) and,
// prefixed, the namespace.
var idPattern = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// Validate implements backends.RuntimeBackend: everything that can be judged without the host
// cluster or the chart. Preflight judges the rest.
func (b *Backend) Validate(spec backends.InstanceSpec) error {
	_, err := b.validate(spec)
	return err
}

// validate judges the spec alone; a worker without a host cluster still refuses a wrong spec
// as wrong (400 at apply), and answers a right one with unavailable (503), in Preflight.
func (b *Backend) validate(spec backends.InstanceSpec) (Options, error) {
	if !idPattern.MatchString(spec.ID) || len(spec.ID) > 40 {
		return Options{}, backends.InvalidSpec(fmt.Errorf("instance id %q: must be a DNS label starting with a letter, of at most 40 characters", spec.ID))
	}
	o, err := ParseOptions(spec.Options)
	return o, backends.InvalidSpec(err)
}

// chartOf is the source and version an instance's chart comes from.
func (b *Backend) chartOf(o Options) (source, version string) {
	source, version = b.cfg.Chart, b.cfg.ChartVersion
	if o.Chart != "" {
		source, version = o.Chart, ""
	}
	if o.ChartVersion != "" {
		version = o.ChartVersion
	}
	return source, version
}

// values are the values an instance is installed with: kobe's, the operator's, the pool's
// Kubernetes version (spec.cluster.version picks the distro image's tag), the pool's values.
func (b *Backend) values(spec backends.InstanceSpec, o Options) map[string]any {
	v := mergeValues(BuiltinValues(), b.cfg.Values)
	if spec.KubernetesVersion != "" {
		v = mergeValues(v, map[string]any{"controlPlane": map[string]any{"distro": map[string]any{"k8s": map[string]any{"version": spec.KubernetesVersion}}}})
	}
	return mergeValues(v, o.values)
}

// Preflight implements backends.Preflighter: the chart is found and loaded, the values pass
// its schema, and the host cluster answers.
func (b *Backend) Preflight(ctx context.Context, spec backends.InstanceSpec) error {
	o, err := b.validate(spec)
	if err != nil {
		return err
	}
	if b.unavailable != "" {
		return errors.New("vcluster backend: " + b.unavailable)
	}
	_, err = b.preflight(ctx, spec, o)
	return err
}

func (b *Backend) preflight(ctx context.Context, spec backends.InstanceSpec, o Options) (*chartAndValues, error) {
	source, version := b.chartOf(o)
	c, err := b.helm.loadChart(ctx, source, version)
	if errors.Is(err, errChartNotFound) {
		return nil, backends.InvalidSpec(fmt.Errorf("spec.backend.vcluster.chart/chartVersion: %w", err))
	}
	if err != nil {
		return nil, fmt.Errorf("vcluster chart source %s: %w", source, err)
	}
	vals := b.values(spec, o)
	if err := checkValues(c, vals); err != nil {
		return nil, backends.InvalidSpec(fmt.Errorf("spec.backend.vcluster.values: the chart %s refuses them: %v", c.Metadata.Version, err))
	}
	if _, err := b.kube.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("vcluster host cluster: %w", err)
	}
	return &chartAndValues{chart: c, values: vals}, nil
}

// Create implements backends.RuntimeBackend: the namespace (labelled with the instance), then
// the release. A retry after a crash completes what the first call began: an existing
// deployed release is left alone, a failed one is upgraded. A first install that fails
// leaves nothing behind.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.InstanceStatus, error) {
	o, err := b.validate(spec)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	if b.unavailable != "" {
		return backends.InstanceStatus{}, errors.New("vcluster backend: " + b.unavailable)
	}
	defer b.locks.Lock(spec.ID)()
	ns := Namespace(spec.ID)
	existing, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return backends.InstanceStatus{}, fmt.Errorf("vcluster host cluster: namespace %s: %w", ns, err)
	case existing.Labels[LabelInstance] != spec.ID:
		return backends.InstanceStatus{}, fmt.Errorf("a namespace %s exists that kobe did not create for instance %s", ns, spec.ID)
	case existing.DeletionTimestamp != nil:
		return backends.InstanceStatus{}, fmt.Errorf("instance %s is being deleted", spec.ID)
	}
	if existing != nil {
		rel, err := b.helm.lastRelease(ns, spec.ID)
		if err != nil {
			return backends.InstanceStatus{}, err
		}
		// Deployed, or being installed by another call: nothing to do. Failed: upgraded below.
		if rel != nil && (rel.Info.Status == release.StatusDeployed || rel.Info.Status.IsPending()) {
			return b.Status(ctx, spec.ID)
		}
	}
	cv, err := b.preflight(ctx, spec, o)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	created := false
	if existing == nil {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			LabelInstance: spec.ID, LabelPool: spec.Pool, LabelBackend: Name,
		}}}
		if _, err := b.kube.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
			return backends.InstanceStatus{}, fmt.Errorf("vcluster host cluster: creating namespace %s: %w", ns, err)
		}
		created = true
	}
	rel, err := b.helm.lastRelease(ns, spec.ID)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	if err := b.helm.install(ctx, ns, spec.ID, cv.chart, cv.values, rel); err != nil {
		if created {
			// Nothing half-created: the release (if Helm recorded one) and the namespace go.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			_ = b.helm.uninstall(ns, spec.ID)
			_ = b.kube.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{})
			cancel()
		}
		return backends.InstanceStatus{}, err
	}
	return b.Status(ctx, spec.ID)
}

type chartAndValues struct {
	chart  *chart.Chart
	values map[string]any
}

// Status implements backends.RuntimeBackend.
func (b *Backend) Status(ctx context.Context, id string) (backends.InstanceStatus, error) {
	if b.unavailable != "" {
		return backends.InstanceStatus{}, errors.New("vcluster backend: " + b.unavailable)
	}
	ns, err := b.kube.CoreV1().Namespaces().Get(ctx, Namespace(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backends.InstanceStatus{}, backends.ErrNotFound
	}
	if err != nil {
		return backends.InstanceStatus{}, fmt.Errorf("vcluster host cluster: %w", err)
	}
	if ns.Labels[LabelInstance] != id {
		return backends.InstanceStatus{}, backends.ErrNotFound
	}
	obs, err := b.observe(ctx, id, ns)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	st := statusOf(id, obs)
	if st.Phase == backends.PhaseReady {
		// Ready means kobe (and so a lease holder) can reach it: the pod is Ready well before
		// the host's Service routes to it (kube-proxy's rules follow the EndpointSlice).
		if err := b.probe(ctx, id); err != nil {
			st.Phase = backends.PhaseCreating
			if _, seen := ns.Annotations[readyAnnotation]; seen {
				st.Phase = backends.PhaseUnhealthy
			}
			st.Message = ReasonAPIUnreachable + ": " + oneLine(err.Error())
			return st, nil
		}
		if _, seen := ns.Annotations[readyAnnotation]; !seen {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, readyAnnotation, time.Now().UTC().Format(time.RFC3339))
			// Best effort: without the mark a later outage reads as Creating, not Unhealthy.
			_, _ = b.kube.CoreV1().Namespaces().Patch(ctx, ns.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		}
	}
	return st, nil
}

// probe asks the vcluster's API, through the Service address and the admin credential, for
// /readyz.
func (b *Backend) probe(ctx context.Context, id string) error {
	admin, err := b.adminKubeconfig(ctx, id)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(admin.kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s/readyz: %w", admin.server, err)
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("GET %s/readyz: %s", admin.server, oneLine(string(body)))
	}
	return nil
}

// WaitReady implements backends.RuntimeBackend. Creating and Unhealthy are waited through;
// Failed ends the wait.
func (b *Backend) WaitReady(ctx context.Context, id string, progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return wait.Ready(ctx, id, b.poll, b.Status, progress)
}

// Delete implements backends.RuntimeBackend: helm uninstall, then the namespace (with the pods
// the syncer put there), then a wait until Leftovers finds nothing, or ctx ends.
func (b *Backend) Delete(ctx context.Context, id string) error {
	if b.unavailable != "" {
		return errors.New("vcluster backend: " + b.unavailable)
	}
	defer b.locks.Lock(id)()
	ns := Namespace(id)
	nsObj, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("vcluster host cluster: %w", err)
	case nsObj.Labels[LabelInstance] != id:
		return fmt.Errorf("namespace %s was not created by kobe for instance %s: not deleting it", ns, id)
	default:
		if nsObj.DeletionTimestamp == nil {
			if err := b.helm.uninstall(ns, id); err != nil {
				return err
			}
			policy := metav1.DeletePropagationBackground
			err := b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &policy})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting namespace %s: %w", ns, err)
			}
		}
	}
	for {
		left, err := b.Leftovers(ctx, id)
		if err == nil && len(left) == 0 {
			return nil
		}
		if err == nil {
			// Cluster-scoped objects of the instance that neither Helm nor the namespace took
			// with them (e.g. created by the syncer) are deleted by name.
			b.deleteClusterScoped(ctx, id)
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

// Leftovers lists what remains of an instance in the host cluster: its namespace, the Helm
// release Secrets (sh.helm.release.v1.<id>.v<n>), and every cluster-scoped object that
// belongs to it (see ownedClusterScoped). Empty once Delete is done.
func (b *Backend) Leftovers(ctx context.Context, id string) ([]string, error) {
	if b.unavailable != "" {
		return nil, errors.New("vcluster backend: " + b.unavailable)
	}
	var left []string
	ns := Namespace(id)
	if n, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		what := "Namespace " + ns
		if n.DeletionTimestamp != nil {
			what += " (terminating)"
		}
		left = append(left, what)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("vcluster host cluster: %w", err)
	}
	secrets, err := b.kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + id})
	if err != nil {
		return nil, fmt.Errorf("listing Helm release Secrets: %w", err)
	}
	for _, s := range secrets.Items {
		if s.Namespace == ns {
			left = append(left, "Secret "+s.Namespace+"/"+s.Name)
		}
	}
	objs, err := b.ownedClusterScoped(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		left = append(left, o.kind+" "+o.name)
	}
	sort.Strings(left)
	return left, nil
}

type clusterObject struct {
	gvr  schema.GroupVersionResource
	kind string
	name string
}

// ownedClusterScoped finds the cluster-scoped objects of an instance, in every listable
// cluster-scoped resource the host serves: labelled with the instance by kobe, carrying the
// release's labels (app=vcluster, release=<id>: the chart's ClusterRole and binding), marked
// by the syncer as managed for the vcluster, bound to a claim in the instance's namespace
// (PersistentVolumes), or named after the namespace (the chart names its cluster roles
// vc-<release>-v-<namespace>).
func (b *Backend) ownedClusterScoped(ctx context.Context, id string) ([]clusterObject, error) {
	lists, err := b.disc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		b.disc.Invalidate()
		return nil, fmt.Errorf("discovery of the host cluster: %w", err)
	}
	ns := Namespace(id)
	var out []clusterObject
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if r.Namespaced || strings.Contains(r.Name, "/") || !contains(r.Verbs, "list") || !contains(r.Verbs, "delete") {
				continue
			}
			if gv.Group == "" && (r.Name == "namespaces" || r.Name == "nodes") {
				continue // the namespace is reported above; nodes are the host's
			}
			gvr := gv.WithResource(r.Name)
			list, err := b.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
					continue
				}
				return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
			}
			for _, item := range list.Items {
				lb := item.GetLabels()
				owned := lb[LabelInstance] == id ||
					(lb["release"] == id && lb["app"] == "vcluster") ||
					lb["vcluster.loft.sh/managed-by"] == id ||
					contains(chartClusterNames(id), item.GetName())
				if gvr.Resource == "persistentvolumes" {
					if claimNS, _, _ := unstructured.NestedString(item.Object, "spec", "claimRef", "namespace"); claimNS == ns {
						owned = true
					}
				}
				if owned {
					out = append(out, clusterObject{gvr: gvr, kind: r.Kind, name: item.GetName()})
				}
			}
		}
	}
	return out, nil
}

// chartClusterNames are the names the chart gives its cluster-scoped objects (_rbac.tpl:
// printf "vc-%s-v-%s" .Release.Name .Release.Namespace | trunc 63 | trimSuffix "-").
func chartClusterNames(id string) []string {
	var out []string
	for _, f := range []string{"vc-%s-v-%s", "vc-mn-%s-v-%s"} {
		n := fmt.Sprintf(f, id, Namespace(id))
		if len(n) > 63 {
			n = n[:63]
		}
		out = append(out, strings.TrimSuffix(n, "-"))
	}
	return out
}

func (b *Backend) deleteClusterScoped(ctx context.Context, id string) {
	objs, err := b.ownedClusterScoped(ctx, id)
	if err != nil {
		return
	}
	for _, o := range objs {
		_ = b.dyn.Resource(o.gvr).Delete(ctx, o.name, metav1.DeleteOptions{})
	}
}

// InstanceIDs lists the instances of this backend in the host cluster (the test harness
// deletes what a test left).
func (b *Backend) InstanceIDs() []string {
	if b.unavailable != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := b.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelBackend + "=" + Name})
	if err != nil {
		return nil
	}
	var ids []string
	for _, n := range list.Items {
		ids = append(ids, n.Labels[LabelInstance])
	}
	sort.Strings(ids)
	return ids
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
