package addons_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/addons"
	"github.com/kunobi-ninja/kobe/poolspec"
)

const manifest = `
# a leading comment and an empty document
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
spec:
  replicas: 1
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: demo
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: guard
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
---
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent", "namespace": "demo"}}
`

func names(t *testing.T, data string) []string {
	t.Helper()
	objs, err := addons.Parse([]byte(data))
	require.NoError(t, err)
	var out []string
	for _, o := range addons.Order(objs) {
		out = append(out, addons.Describe(o))
	}
	return out
}

func TestParseAndOrder(t *testing.T) {
	assert.Equal(t, []string{
		"Namespace demo",
		"CustomResourceDefinition widgets.example.com",
		"Deployment demo/web", // then the rest in manifest order
		"Widget demo/w1",
		"ServiceAccount demo/agent",
		"ValidatingWebhookConfiguration guard", // webhooks last
	}, names(t, manifest))
}

func TestParseExpandsLists(t *testing.T) {
	assert.Equal(t, []string{"ConfigMap a", "ConfigMap b"}, names(t, `
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
`))
}

func TestParseEmpty(t *testing.T) {
	objs, err := addons.Parse([]byte("---\n# nothing\n---\n"))
	require.NoError(t, err)
	assert.Empty(t, objs)
}

func TestParseErrorsAreInvalid(t *testing.T) {
	cases := map[string]struct{ manifest, want string }{
		"bad yaml":      {"apiVersion: v1\nkind: [ConfigMap\n", "document 1"},
		"no kind":       {"apiVersion: v1\nmetadata: {name: a}\n", "document 1: apiVersion and kind are required"},
		"no name":       {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: x-}\n", "document 2: Pod: metadata.name is required"},
		"not an object": {"- a\n- b\n", "document 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := addons.Parse([]byte(tc.manifest))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, errors.Is(err, addons.ErrInvalid), "a manifest that does not parse never will: %v", err)
		})
	}
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	data, err := addons.Load(ctx, poolspec.Addon{Name: "a", Manifest: "x"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "x", string(data))

	_, err = addons.Load(ctx, poolspec.Addon{Name: "a"}, nil)
	assert.ErrorIs(t, err, addons.ErrInvalid)

	var asked string
	fetch := func(_ context.Context, url string) ([]byte, error) { asked = url; return []byte("y"), nil }
	data, err = addons.Load(ctx, poolspec.Addon{Name: "a", URL: "https://example.com/a.yaml"}, fetch)
	require.NoError(t, err)
	assert.Equal(t, "y", string(data))
	assert.Equal(t, "https://example.com/a.yaml", asked)
}

func TestHTTPFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok.yaml":
			_, _ = w.Write([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"))
		case "/huge.yaml":
			_, _ = w.Write([]byte(strings.Repeat("#", addons.MaxFetchSize+1)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	data, err := addons.HTTPFetch(ctx, srv.URL+"/ok.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(data), "Namespace")

	_, err = addons.HTTPFetch(ctx, srv.URL+"/missing.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")

	_, err = addons.HTTPFetch(ctx, srv.URL+"/huge.yaml")
	assert.ErrorIs(t, err, addons.ErrInvalid)

	_, err = addons.HTTPFetch(ctx, "file:///etc/passwd")
	assert.ErrorIs(t, err, addons.ErrInvalid)
}
