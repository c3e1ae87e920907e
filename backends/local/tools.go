package local

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	sort.Strings(out)
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
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}
