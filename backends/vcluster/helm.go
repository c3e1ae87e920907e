package vcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// chartName is the chart's name in an https chart repository.
const chartName = "vcluster"

// restGetter gives Helm's kube client the host cluster's REST config and one namespace (Helm
// asks a RESTClientGetter; kobe has a rest.Config, not a kubeconfig file).
type restGetter struct {
	cfg       *rest.Config
	namespace string
	disc      discovery.CachedDiscoveryInterface
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }
func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.disc, nil
}
func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	m := restmapper.NewDeferredDiscoveryRESTMapper(g.disc)
	return restmapper.NewShortcutExpander(m, g.disc, nil), nil
}
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return clientConfig{g} }

// clientConfig is the clientcmd.ClientConfig of a restGetter: its config and namespace.
type clientConfig struct{ g *restGetter }

func (c clientConfig) RawConfig() (clientcmdapi.Config, error) { return clientcmdapi.Config{}, nil }
func (c clientConfig) ClientConfig() (*rest.Config, error)     { return c.g.ToRESTConfig() }
func (c clientConfig) Namespace() (string, bool, error)        { return c.g.namespace, true, nil }
func (c clientConfig) ConfigAccess() clientcmd.ConfigAccess {
	return clientcmd.NewDefaultClientConfigLoadingRules()
}

// helmClient runs Helm actions against the host cluster, one namespace at a time, and finds
// and loads charts (a loaded chart is kept: charts are immutable per source and version).
type helmClient struct {
	cfg      *rest.Config
	disc     discovery.CachedDiscoveryInterface
	settings *cli.EnvSettings
	registry *registry.Client

	mu     sync.Mutex
	charts map[string]*chart.Chart
}

// newHelmClient keeps Helm's repository cache, repository file and registry config under
// dir (not $HOME): a worker's Helm state is its own.
func newHelmClient(cfg *rest.Config, disc discovery.CachedDiscoveryInterface, dir string) (*helmClient, error) {
	s := cli.New()
	s.RepositoryCache = filepath.Join(dir, "repository-cache")
	s.RepositoryConfig = filepath.Join(dir, "repositories.yaml")
	s.RegistryConfig = filepath.Join(dir, "registry.json")
	rc, err := registry.NewClient(registry.ClientOptWriter(io.Discard), registry.ClientOptCredentialsFile(s.RegistryConfig))
	if err != nil {
		return nil, fmt.Errorf("helm registry client: %w", err)
	}
	return &helmClient{cfg: cfg, disc: disc, settings: s, registry: rc, charts: map[string]*chart.Chart{}}, nil
}

func (h *helmClient) action(namespace string) (*action.Configuration, error) {
	ac := new(action.Configuration)
	getter := &restGetter{cfg: h.cfg, namespace: namespace, disc: h.disc}
	if err := ac.Init(getter, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	ac.RegistryClient = h.registry
	return ac, nil
}

// errChartNotFound marks a chart source that answered but has no such chart or version: the
// spec is wrong, unlike a source that does not answer.
var errChartNotFound = errors.New("chart not found")

// loadChart finds the chart of a source and version and loads it. A local chart must carry
// the version asked for (Helm cannot pick a version of a directory).
func (h *helmClient) loadChart(ctx context.Context, source, version string) (*chart.Chart, error) {
	kind, err := sourceKind(source)
	if err != nil {
		return nil, err
	}
	key := source + "@" + version
	h.mu.Lock()
	c, ok := h.charts[key]
	h.mu.Unlock()
	if ok {
		return c, nil
	}
	var path string
	switch kind {
	case sourceLocal:
		if _, err := os.Stat(source); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errChartNotFound, source, err)
		}
		path = source
	default:
		cpo := action.ChartPathOptions{Version: version}
		name := source
		if kind == sourceRepo {
			cpo.RepoURL, name = source, chartName
		}
		inst := action.NewInstall(&action.Configuration{RegistryClient: h.registry})
		inst.ChartPathOptions = cpo
		inst.SetRegistryClient(h.registry)
		if err := os.MkdirAll(h.settings.RepositoryCache, 0o755); err != nil {
			return nil, err
		}
		// LocateChart takes no context: a source that hangs must not hang the caller.
		type located struct {
			path string
			err  error
		}
		done := make(chan located, 1)
		go func() {
			p, err := inst.ChartPathOptions.LocateChart(name, h.settings)
			done <- located{p, err}
		}()
		select {
		case l := <-done:
			path, err = l.path, l.err
		case <-ctx.Done():
			return nil, fmt.Errorf("fetching chart %s version %q: %w", source, version, ctx.Err())
		}
		if err != nil {
			if notFound(err) {
				return nil, fmt.Errorf("%w: %s version %q: %v", errChartNotFound, source, version, err)
			}
			return nil, fmt.Errorf("fetching chart %s version %q: %w", source, version, err)
		}
	}
	c, err = loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s: %v", errChartNotFound, path, err)
	}
	if c.Metadata == nil || c.Metadata.Name != chartName {
		return nil, fmt.Errorf("%w: %s is not the vcluster chart (its name is %q)", errChartNotFound, source, c.Name())
	}
	if version != "" && strings.TrimPrefix(c.Metadata.Version, "v") != strings.TrimPrefix(version, "v") {
		return nil, fmt.Errorf("%w: %s is version %s, not %s", errChartNotFound, source, c.Metadata.Version, version)
	}
	h.mu.Lock()
	h.charts[key] = c
	h.mu.Unlock()
	return c, nil
}

// notFound tells a source that answered "no such chart or version" from one that did not
// answer (Helm's errors carry no types for these).
func notFound(err error) bool {
	s := strings.ToLower(err.Error())
	for _, m := range []string{"not found", "no chart version", "no such", ": 404", "manifest unknown", "name unknown"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// checkValues validates values against the chart's values.schema.json, as Helm does at
// install, without installing.
func checkValues(c *chart.Chart, vals map[string]any) error {
	merged, err := chartutil.CoalesceValues(c, vals)
	if err != nil {
		return err
	}
	return chartutil.ValidateAgainstSchema(c, merged)
}

// lastRelease is the newest revision of a release, or nil when it has none.
func (h *helmClient) lastRelease(namespace, name string) (*release.Release, error) {
	ac, err := h.action(namespace)
	if err != nil {
		return nil, err
	}
	rel, err := ac.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("helm release %s/%s: %w", namespace, name, err)
	}
	return rel, nil
}

// install installs (or, when a failed revision exists, upgrades) the release without waiting
// for its pods: readiness is Status's business.
func (h *helmClient) install(ctx context.Context, namespace, name string, c *chart.Chart, vals map[string]any, last *release.Release) error {
	ac, err := h.action(namespace)
	if err != nil {
		return err
	}
	if last != nil {
		up := action.NewUpgrade(ac)
		up.Namespace = namespace
		up.Timeout = 5 * time.Minute
		up.MaxHistory = 3
		if _, err := up.RunWithContext(ctx, name, c, vals); err != nil {
			return fmt.Errorf("helm upgrade %s/%s: %w", namespace, name, err)
		}
		return nil
	}
	in := action.NewInstall(ac)
	in.ReleaseName = name
	in.Namespace = namespace
	in.Timeout = 5 * time.Minute
	if _, err := in.RunWithContext(ctx, c, vals); err != nil {
		return fmt.Errorf("helm install %s/%s: %w", namespace, name, err)
	}
	return nil
}

// uninstall removes the release and its history; a release that does not exist is fine.
func (h *helmClient) uninstall(namespace, name string) error {
	ac, err := h.action(namespace)
	if err != nil {
		return err
	}
	un := action.NewUninstall(ac)
	un.IgnoreNotFound = true
	un.Timeout = 2 * time.Minute
	un.DeletionPropagation = "background"
	if _, err := un.Run(name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("helm uninstall %s/%s: %w", namespace, name, err)
	}
	return nil
}

// newDiscovery is the cached discovery client Helm's kube client maps kinds with.
func newDiscovery(cfg *rest.Config) (discovery.CachedDiscoveryInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}
