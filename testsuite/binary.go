package testsuite

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MainWithKobeBinary is the TestMain of a package that runs the real kobe binary: it builds
// cmd/kobe (from a package two levels under the repository root) into a temporary folder,
// points *bin at it, runs the tests and exits with their code. With -short it runs nothing and
// says why. KOBE_CONFIG goes to the same folder, so `kobe dev` writes its CLI context into the
// test's own config, never the user's.
func MainWithKobeBinary(m *testing.M, suite, why string, bin *string) {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("%s: skipped with -short (%s)\n", suite, why)
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "kobe-"+suite+"-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, "kobe")
	os.Setenv("KOBE_CONFIG", filepath.Join(dir, "config.yaml"))
	build := exec.Command("go", "build", "-o", *bin, "../../cmd/kobe")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building kobe: %v\n", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
