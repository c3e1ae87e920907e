package v1alpha1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
)

// exampleFiles are upstream's example pools (a copy of ../shared/examples/pools kept beside
// poolspec's tests) and this package's manifest with every field set.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../poolspec/testdata/upstream/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, 6, "upstream's six example pools")
	return append(files, "testdata/every-field.yaml")
}

// asData is v marshalled to JSON and read back as plain data: manifests compared as data, not
// as text (the key order of a backend's section may differ).
func asData(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// Every example, manifest → resource → manifest, is the manifest it was; read directly as a
// resource it is the resource the conversion makes, and that resource's manifest is the same.
func TestManifestsRoundTrip(t *testing.T) {
	for _, f := range exampleFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			m, err := poolspec.Parse(data)
			require.NoError(t, err)

			cr, err := v1alpha1.FromManifest(m)
			require.NoError(t, err)
			assert.Equal(t, "kobe.kunobi.ninja/v1alpha1", cr.APIVersion)
			assert.Equal(t, "ClusterPool", cr.Kind)
			assert.Equal(t, m.Metadata.Name, cr.Name)
			back, err := cr.Manifest()
			require.NoError(t, err)
			assert.Equal(t, asData(t, m), asData(t, back), "manifest → resource → manifest")

			var direct v1alpha1.ClusterPool
			require.NoError(t, yaml.UnmarshalStrict(data, &direct), "the file is a ClusterPool resource as it is")
			assert.Equal(t, asData(t, cr.Spec), asData(t, direct.Spec), "read as a resource, the same spec")
			fromDirect, err := direct.Manifest()
			require.NoError(t, err)
			assert.Equal(t, asData(t, m), asData(t, fromDirect), "the resource's manifest is the file's")
		})
	}
}

// A pool's manifest is rebuilt from the resource's metadata: kubectl's last-applied copy of the
// object is the client's bookkeeping and stays out; the author's annotations come through.
func TestManifestLeavesKubectlsCopyOut(t *testing.T) {
	data, err := os.ReadFile("../../poolspec/testdata/upstream/dev-local.yaml")
	require.NoError(t, err)
	var cr v1alpha1.ClusterPool
	require.NoError(t, yaml.UnmarshalStrict(data, &cr))
	cr.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(data), "owner": "platform"}
	m, err := cr.Manifest()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "platform"}, m.Metadata.Annotations)

	cr.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(data)}
	m, err = cr.Manifest()
	require.NoError(t, err)
	assert.Nil(t, m.Metadata.Annotations)
}

// What the resource cannot hold is an error naming it, both ways.
func TestConversionRefusesWhatTheOtherSideCannotHold(t *testing.T) {
	m, err := poolspec.Parse([]byte("apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: p}\n" +
		"spec:\n  backend: {type: local, vkobe: {version: x}}\n  cluster: {version: v1.37.2}\n"))
	require.NoError(t, err, "poolspec parses a section of any name (Validate refuses it)")
	_, err = v1alpha1.FromManifest(m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `pool p: spec: a ClusterPool resource cannot hold it: json: unknown field "vkobe"`)

	// A section that is not an object, written into a resource by a client that skipped the
	// API server's schema, is refused by poolspec with the field's path.
	cr := v1alpha1.ClusterPool{Spec: v1alpha1.ClusterPoolSpec{Cluster: v1alpha1.Cluster{Version: "v1.32.0+k3s1"}}}
	cr.Name = "p"
	cr.Spec.Backend.K3s = &apiextensionsv1.JSON{Raw: []byte(`[1]`)}
	cr.Spec.Backend.Type = "k3s"
	m, err = cr.Manifest()
	require.NoError(t, err, "a section's content is the backend's to judge")
	_, err = m.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.backend.k3s: must be an object")
}

// The resource's spec and the manifest's spec are the same tree of JSON fields: same names,
// same kinds, same presence (a pointer on one side is a pointer on the other), so that the
// conversion through JSON carries every field and the absence of every field. The parts a
// manifest keeps as raw JSON for their owner (a backend's shared parts, upstream's refused
// fields) are typed in the resource; the every-field round trip covers them.
func TestSpecFieldsMatchTheManifest(t *testing.T) {
	compareFields(t, "spec", reflect.TypeOf(poolspec.Spec{}), reflect.TypeOf(v1alpha1.ClusterPoolSpec{}))
}

var (
	rawMessage = reflect.TypeOf(json.RawMessage{})
	rawJSON    = reflect.TypeOf(apiextensionsv1.JSON{})
)

func compareFields(t *testing.T, path string, manifest, resource reflect.Type) {
	t.Helper()
	if manifest == rawMessage {
		return
	}
	if (manifest.Kind() == reflect.Pointer) != (resource.Kind() == reflect.Pointer) {
		t.Errorf("%s: %s in the manifest, %s in the resource (presence would differ)", path, manifest, resource)
		return
	}
	if manifest.Kind() == reflect.Pointer {
		manifest, resource = manifest.Elem(), resource.Elem()
	}
	if manifest.Kind() != resource.Kind() {
		t.Errorf("%s: %s in the manifest, %s in the resource", path, manifest.Kind(), resource.Kind())
		return
	}
	switch manifest.Kind() {
	case reflect.Slice, reflect.Map:
		compareFields(t, path+"[]", manifest.Elem(), resource.Elem())
	case reflect.Struct:
		mf, rf := jsonFields(manifest), jsonFields(resource)
		for name, f := range mf {
			g, ok := rf[name]
			if !ok {
				t.Errorf("%s.%s: in the manifest (%s), not in the resource", path, name, manifest)
				continue
			}
			compareFields(t, path+"."+name, f.Type, g.Type)
		}
		for name, g := range rf {
			if _, ok := mf[name]; !ok && !(manifest == reflect.TypeOf(poolspec.Backend{}) && isSection(g.Type)) {
				t.Errorf("%s.%s: in the resource (%s), not in the manifest", path, name, resource)
			}
		}
	}
}

// isSection: a backend's section, which the manifest keeps by name (poolspec.Backend.Sections).
func isSection(t reflect.Type) bool { return t.Kind() == reflect.Pointer && t.Elem() == rawJSON }

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name := strings.Split(f.Tag.Get("json"), ",")[0]; name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}
