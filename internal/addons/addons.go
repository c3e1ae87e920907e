// Package addons applies a pool's addons (spec.addons: inline manifests or manifests at a URL)
// to a new member before it is Ready. Every object is server-side applied with field manager
// "kobe" and force, so applying an addon again (an activity retried after a crash) is harmless.
package addons

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// FieldManager is the server-side apply field manager of everything kobe applies.
const FieldManager = "kobe"

// Limits of a manifest fetched from a URL: an addon is a few objects, not a download mirror.
const (
	FetchTimeout = 30 * time.Second
	MaxFetchSize = 8 << 20
)

// CRDs of an addon must be Established within this before its custom resources are applied.
const establishTimeout = 2 * time.Minute

// ErrInvalid marks an addon that can never be applied as written (a manifest that does not
// parse, an object without a name, a URL that is not http(s)): retrying will not help.
var ErrInvalid = errors.New("invalid addon")

// Fetcher returns the manifest at a URL. HTTPFetch is the default.
type Fetcher func(ctx context.Context, url string) ([]byte, error)

// Apply applies one addon to the cluster behind cfg: Namespaces first, then
// CustomResourceDefinitions (waiting until they are Established, so that custom resources of
// the same addon can be applied), then everything else in manifest order, admission webhook
// configurations last (a webhook whose backend is not running yet would reject the objects
// applied after it). fetch reads addon.URL; nil means HTTPFetch.
func Apply(ctx context.Context, cfg *rest.Config, addon poolspec.Addon, fetch Fetcher) error {
	data, err := Load(ctx, addon, fetch)
	if err != nil {
		return err
	}
	objs, err := Parse(data)
	if err != nil {
		return fmt.Errorf("addon %q: %w", addon.Name, err)
	}
	a, err := newApplier(cfg)
	if err != nil {
		return fmt.Errorf("addon %q: %w", addon.Name, err)
	}
	var crds []string
	for _, obj := range Order(objs) {
		if len(crds) > 0 && rank(obj) > rankCRD {
			// The first object after the CRDs: their kinds must be served before we go on.
			if err := a.waitEstablished(ctx, crds); err != nil {
				return fmt.Errorf("addon %q: %w", addon.Name, err)
			}
			crds = nil
		}
		if err := a.apply(ctx, obj); err != nil {
			return fmt.Errorf("addon %q: %s: %w", addon.Name, Describe(obj), err)
		}
		if rank(obj) == rankCRD {
			crds = append(crds, obj.GetName())
		}
	}
	if len(crds) > 0 {
		// An addon of CRDs only: its users (gates, later addons) expect them served.
		if err := a.waitEstablished(ctx, crds); err != nil {
			return fmt.Errorf("addon %q: %w", addon.Name, err)
		}
	}
	return nil
}

// Load returns the addon's manifest: inline, or fetched from its URL.
func Load(ctx context.Context, addon poolspec.Addon, fetch Fetcher) ([]byte, error) {
	if (addon.Manifest == "") == (addon.URL == "") {
		return nil, fmt.Errorf("addon %q: give exactly one of manifest or url: %w", addon.Name, ErrInvalid)
	}
	if addon.Manifest != "" {
		return []byte(addon.Manifest), nil
	}
	if fetch == nil {
		fetch = HTTPFetch
	}
	data, err := fetch(ctx, addon.URL)
	if err != nil {
		return nil, fmt.Errorf("addon %q: %w", addon.Name, err)
	}
	return data, nil
}

// HTTPFetch GETs an http(s) URL within FetchTimeout and refuses bodies over MaxFetchSize.
func HTTPFetch(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: must be an http or https URL: %w", rawURL, ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("url %q: %v: %w", rawURL, err, ErrInvalid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("fetching %s: %s", rawURL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxFetchSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", rawURL, err)
	}
	if len(data) > MaxFetchSize {
		return nil, fmt.Errorf("fetching %s: larger than %d bytes: %w", rawURL, MaxFetchSize, ErrInvalid)
	}
	return data, nil
}

// Parse splits a multi-document YAML (or JSON) manifest into objects. Empty documents are
// skipped, `kind: List` documents are expanded into their items; every object must have
// apiVersion, kind and metadata.name.
func Parse(manifest []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %v: %w", doc, err, ErrInvalid)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: not valid YAML: %v: %w", doc, err, ErrInvalid)
		}
		js = bytes.TrimSpace(js)
		if len(js) == 0 || string(js) == "null" {
			continue // a separator, comments only
		}
		var m map[string]any
		// apimachinery's json keeps whole numbers int64, as unstructured objects expect.
		if err := utiljson.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("document %d: expected a Kubernetes object: %v: %w", doc, err, ErrInvalid)
		}
		obj := &unstructured.Unstructured{Object: m}
		items := []*unstructured.Unstructured{obj}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %v: %w", doc, err, ErrInvalid)
			}
			items = items[:0]
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		}
		for _, o := range items {
			if o.GetAPIVersion() == "" || o.GetKind() == "" {
				return nil, fmt.Errorf("document %d: apiVersion and kind are required: %w", doc, ErrInvalid)
			}
			if o.GetName() == "" {
				return nil, fmt.Errorf("document %d: %s: metadata.name is required (generateName cannot be applied idempotently): %w",
					doc, o.GetKind(), ErrInvalid)
			}
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// Ranks of the apply order.
const (
	rankNamespace = iota
	rankCRD
	rankOther
	rankWebhook
)

func rank(obj *unstructured.Unstructured) int {
	gk := obj.GroupVersionKind().GroupKind()
	switch gk {
	case schema.GroupKind{Kind: "Namespace"}:
		return rankNamespace
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return rankCRD
	case schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
		schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:
		return rankWebhook
	}
	return rankOther
}

// Order returns the objects in apply order (see Apply); within a rank, manifest order is kept.
func Order(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// Describe names an object in errors: kind namespace/name (or kind name when cluster-scoped).
func Describe(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", obj.GetKind(), ns, obj.GetName())
	}
	return fmt.Sprintf("%s %s", obj.GetKind(), obj.GetName())
}

type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(cfg *rest.Config) (*applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// apply server-side applies one object.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// Discovery is cached: a kind registered since (a CRD of this addon or of an earlier
		// one, or installed by a controller) needs a fresh look.
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return fmt.Errorf("the cluster does not serve %s (is its CRD installed?)", gvk)
		}
		return err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	obj = obj.DeepCopy()
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		ri = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	} else {
		obj.SetNamespace("") // as kubectl does: a namespace on a cluster-scoped object means nothing
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if apierrors.IsInvalid(err) {
		// The API server refused the object as written (schema, immutable field): permanent.
		return fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	return err
}

// waitEstablished waits until every named CRD is Established, then refreshes discovery so that
// their kinds map.
func (a *applier) waitEstablished(ctx context.Context, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, establishTimeout)
	defer cancel()
	for _, name := range names {
		for {
			done, err := crdEstablished(ctx, a.dyn, name)
			if err != nil {
				return fmt.Errorf("CustomResourceDefinition %s: %w", name, err)
			}
			if done {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CustomResourceDefinition %s: not Established after %s: %w", name, establishTimeout, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	a.mapper.Reset()
	return nil
}

// crdEstablished reports whether the CRD is Established. A CRD whose names conflict with
// another's is never established: that is reported as an error at once.
func crdEstablished(ctx context.Context, dyn dynamic.Interface, name string) (bool, error) {
	crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		switch {
		case cm["type"] == "Established" && cm["status"] == "True":
			return true, nil
		case cm["type"] == "NamesAccepted" && cm["status"] == "False":
			return false, fmt.Errorf("names not accepted: %v: %w", cm["message"], ErrInvalid)
		}
	}
	return false, nil
}
