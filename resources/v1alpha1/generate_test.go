package v1alpha1_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/backends"
	_ "github.com/kunobi-ninja/kobe/backends/capi" // the backends a kobe binary has (cmd/kobe)
	_ "github.com/kunobi-ninja/kobe/backends/k0s"
	_ "github.com/kunobi-ninja/kobe/backends/k3s"
	"github.com/kunobi-ninja/kobe/backends/local"
	_ "github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
)

const crdDir = "../../deploy/crds"

// readCRD reads one of the committed CustomResourceDefinitions.
func readCRD(t *testing.T, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdDir, "kobe.kunobi.ninja_"+plural+".yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(data, &crd))
	return &crd
}

// The committed CRDs and deep copies are what controller-gen makes of the types now
// (hack/generate.sh, as `make generate` runs it). The controller-gen that made them is named in
// the CRDs; without it the test skips, outside CI: KOBE_TEST_REQUIRE_CONTROLLER_GEN=1 (.ci/run)
// makes that a failure.
func TestGeneratedFilesMatchTheTypes(t *testing.T) {
	version := readCRD(t, "clusterpools").Annotations["controller-gen.kubebuilder.io/version"]
	require.NotEmpty(t, version, "the CRD names the controller-gen that generated it")
	bin := filepath.Join(local.DefaultToolsDir(), "controller-gen-"+version, "controller-gen")
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("controller-gen %s is not built (%s): run `make tools` or hack/build-controller-gen.sh", version, bin)
		if os.Getenv("KOBE_TEST_REQUIRE_CONTROLLER_GEN") == "1" {
			t.Fatalf("%s (KOBE_TEST_REQUIRE_CONTROLLER_GEN=1)", msg)
		}
		t.Skip(msg)
	}
	out := t.TempDir()
	t0 := time.Now()
	cmd := exec.Command("../../hack/generate.sh", filepath.Join(out, "crds"), filepath.Join(out, "deepcopy"))
	cmd.Env = append(os.Environ(), "CONTROLLER_GEN="+bin)
	if raceGOFLAGS != "" {
		cmd.Env = append(cmd.Env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" "+raceGOFLAGS))
	}
	logs, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/generate.sh: %s", logs)
	t.Logf("controller-gen %s ran in %s", version, time.Since(t0).Round(time.Millisecond))

	same := func(committed, generated string) {
		want, err := os.ReadFile(committed)
		require.NoError(t, err)
		got, err := os.ReadFile(generated)
		require.NoError(t, err, "controller-gen wrote no %s", filepath.Base(generated))
		if !bytes.Equal(want, got) {
			t.Errorf("%s differs from what controller-gen makes of the types: run `make generate` and commit the result", committed)
		}
	}
	same("zz_generated.deepcopy.go", filepath.Join(out, "deepcopy", "zz_generated.deepcopy.go"))
	generated, err := filepath.Glob(filepath.Join(out, "crds", "*.yaml"))
	require.NoError(t, err)
	committed, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	require.NoError(t, err)
	names := func(files []string) (out []string) {
		for _, f := range files {
			out = append(out, filepath.Base(f))
		}
		return out
	}
	require.Equal(t, names(committed), names(generated), "the CRD files of deploy/crds")
	for _, f := range generated {
		same(filepath.Join(crdDir, filepath.Base(f)), f)
	}
}

// spec.backend names a section for each backend kobe compiles in, and its type is one of them:
// a backend added to kobe needs its section in the CRD (then `make generate`).
func TestBackendSectionsAreTheCompiledInBackends(t *testing.T) {
	crd := readCRD(t, "clusterpools")
	backend := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["backend"]
	var sections []string
	for name, prop := range backend.Properties {
		if prop.XPreserveUnknownFields != nil && *prop.XPreserveUnknownFields {
			sections = append(sections, name)
		}
	}
	sort.Strings(sections)
	assert.Equal(t, backends.Names(), sections, "spec.backend's sections")
	var types []string
	for _, e := range backend.Properties["type"].Enum {
		types = append(types, strings.Trim(string(e.Raw), `"`))
	}
	sort.Strings(types)
	assert.Equal(t, backends.Names(), types, "spec.backend.type's values")
	assert.Contains(t, types, poolspec.DefaultBackend)
}

// A role's permissions in an AccessPolicy are the permissions kobe's policy knows.
func TestPermissionsAreKobes(t *testing.T) {
	crd := readCRD(t, "accesspolicies")
	role := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["roles"].AdditionalProperties.Schema
	var perms []string
	for _, e := range role.Properties["permissions"].Items.Schema.Enum {
		perms = append(perms, strings.Trim(string(e.Raw), `"`))
	}
	assert.ElementsMatch(t, []string{access.PermLease, access.PermPoolRead, access.PermPoolAdmin, access.PermAudit, access.PermTokens}, perms)
}

// Every regular expression the CRDs' rules match a duration with is DurationPattern or
// DaysPattern (a marker cannot name a constant, so the pattern is written out in each rule).
func TestRulesUseTheDurationPatterns(t *testing.T) {
	matches := regexp.MustCompile(`\.matches\(r?'([^']*)'\)`)
	others := []string{
		`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`,   // metadata.name of a pool
		`^ *[0-9*,/-]+( +[0-9*,/-]+){4} *$`, // a cron expression
		`^[^\s]*[:#/@]$`,                    // an OIDC principal prefix
	}
	seen := map[string]int{}
	for _, plural := range []string{"clusterpools", "accesspolicies"} {
		crd := readCRD(t, plural)
		var walk func(path string, s apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
			for _, r := range s.XValidations {
				for _, m := range matches.FindAllStringSubmatch(r.Rule, -1) {
					seen[m[1]]++
					if m[1] != v1alpha1.DurationPattern && m[1] != v1alpha1.DaysPattern && !slices.Contains(others, m[1]) {
						t.Errorf("%s: a rule matches %q, neither DurationPattern nor DaysPattern", path, m[1])
					}
				}
			}
			for name, p := range s.Properties {
				walk(path+"."+name, p)
			}
			if s.Items != nil && s.Items.Schema != nil {
				walk(path+"[]", *s.Items.Schema)
			}
			if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				walk(path+"{}", *s.AdditionalProperties.Schema)
			}
		}
		walk(plural, *crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	}
	assert.Greater(t, seen[v1alpha1.DurationPattern], 10, "the duration rules were found")
	assert.Greater(t, seen[v1alpha1.DaysPattern], 2, "the days rules were found")
}

// DurationPattern accepts what time.ParseDuration reads as a duration that is not negative,
// and DaysPattern what poolspec.ParseDays reads; the exceptions are forms no manifest needs
// (a sign, a number too large), which kobe still refuses or reads itself.
func TestDurationPatternsAreKobes(t *testing.T) {
	inputs := []string{"0", "5s", "5m", "2h", "1h30m", "1.5h", ".5s", "5.s", "300ms", "10us", "10µs", "10μs", "100ns",
		"", "5", "s", "5 m", "5min", "5d", "5m ", " 5m", "h5", "1e3s", "5M", "0.0s", "00m", "1h1h", "5.5.5s", "P1D", "5m-1s"}
	days := append(slices.Clone(inputs), "30d", "0d", "1d12h", "d", "1.5d", "-1d", "007d")
	// A sign: kobe reads it, the CRD refuses it. A number too large: the CRD takes its form,
	// kobe refuses it (and so does the rules' duration(), with an evaluation error).
	signed := []string{"+5m", "-0s"}
	tooLarge := []string{"99999999999h", "36501d"}
	durationRE, daysRE := regexp.MustCompile(v1alpha1.DurationPattern), regexp.MustCompile(v1alpha1.DaysPattern)
	for _, in := range append(inputs, "-5m") {
		d, err := time.ParseDuration(in)
		assert.Equal(t, err == nil && d >= 0, durationRE.MatchString(in), "DurationPattern on %q", in)
	}
	for _, in := range days {
		_, err := poolspec.ParseDays("f", poolspec.Duration(in))
		assert.Equal(t, err == nil, daysRE.MatchString(in), "DaysPattern on %q", in)
	}
	for _, in := range signed {
		_, err := poolspec.ParseDays("f", poolspec.Duration(in))
		assert.NoError(t, err, in)
		assert.False(t, durationRE.MatchString(in) || daysRE.MatchString(in), "%q: refused by the CRD", in)
	}
	for _, in := range tooLarge {
		_, err := poolspec.ParseDays("f", poolspec.Duration(in))
		assert.Error(t, err, in)
		assert.True(t, daysRE.MatchString(in), "%q: its form is a duration's", in)
	}
}
