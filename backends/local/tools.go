package local

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Tools locates the binaries `make tools` builds: <dir>/<tool>-<version>/<binary>.
type Tools struct {
	Dir string
}

// DefaultToolsDir is $KOBE_TOOLS_DIR, else .cache/tools beside the binary's repository
// (bin/kobe → .cache/tools), else ./.cache/tools.
func DefaultToolsDir() string {
	if d := os.Getenv("KOBE_TOOLS_DIR"); d != "" {
		return d
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Join(filepath.Dir(exe), "..", ".cache", "tools")
		if _, err := os.Stat(d); err == nil {
			return filepath.Clean(d)
		}
	}
	if wd, err := os.Getwd(); err == nil {
		// Tests run in a package folder: walk up to the module root.
		for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return filepath.Join(d, ".cache", "tools")
			}
		}
	}
	return filepath.Join(".cache", "tools")
}

// KubernetesVersions lists the versions whose kube-apiserver was built, sorted.
func (t Tools) KubernetesVersions() []string {
	var out []string
	matches, _ := filepath.Glob(filepath.Join(t.Dir, "kubernetes-v*", "kube-apiserver"))
	for _, m := range matches {
		out = append(out, strings.TrimPrefix(filepath.Base(filepath.Dir(m)), "kubernetes-"))
	}
	SortVersions(out)
	return out
}

// Kubernetes returns the path of a Kubernetes component (kube-apiserver, …) of version.
func (t Tools) Kubernetes(version, component string) (string, error) {
	p := filepath.Join(t.Dir, "kubernetes-"+version, component)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s is not built in %s (run `make tools`)", component, version, t.Dir)
	}
	return p, nil
}

// Newest returns the path of the newest built version of a non-Kubernetes tool (kine, kwok).
func (t Tools) Newest(tool, binary string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(t.Dir, tool+"-v*", binary))
	if len(matches) == 0 {
		return "", fmt.Errorf("%s is not built in %s (run `make tools`)", tool, t.Dir)
	}
	// By version, not by string: "kine-v0.9.0" sorts after "kine-v0.17.5" as text.
	sort.Slice(matches, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(matches[i])), filepath.Base(filepath.Dir(matches[j])))
	})
	return matches[len(matches)-1], nil
}

// SortVersions sorts versions such as v1.37.2 (or tool-v1.37.2) by their numbers, oldest first.
func SortVersions(vs []string) {
	sort.Slice(vs, func(i, j int) bool { return versionLess(vs[i], vs[j]) })
}

// versionLess orders versions by apimachinery's rules (a pre-release before its release), on
// what follows the first "v" and a digit; text that is no version sorts as text, first.
func versionLess(a, b string) bool {
	va, vb := parseVersion(a), parseVersion(b)
	switch {
	case va == nil || vb == nil:
		if (va == nil) != (vb == nil) {
			return va == nil
		}
	case va.LessThan(vb):
		return true
	case vb.LessThan(va):
		return false
	}
	return a < b
}

func parseVersion(s string) *version.Version {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == 'v' && s[i+1] >= '0' && s[i+1] <= '9' {
			s = s[i:]
			break
		}
	}
	if v, err := version.ParseSemantic(s); err == nil {
		return v
	}
	v, err := version.ParseGeneric(s)
	if err != nil {
		return nil
	}
	return v
}
