// Command kobe-images builds the images of testsuite/hostcluster's real node as OCI archives
// and, given a containerd socket, imports them under their exact names:
//
//	go run ./testsuite/hostcluster/images/cmd/kobe-images                  # archives into $KOBE_TOOLS_DIR/images
//	go run ./testsuite/hostcluster/images/cmd/kobe-images -address /run/containerd/containerd.sock
//
// The binaries come from $KOBE_TOOLS_DIR/versions.env (`make tools`); docs/hostcluster.md lists
// the images and what is in them.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kunobi-ninja/kobe/testsuite/hostcluster/images"
)

func main() {
	toolsDir := os.Getenv("KOBE_TOOLS_DIR")
	if toolsDir == "" {
		toolsDir = ".cache/tools"
	}
	tools := flag.String("tools", toolsDir, "the tools folder of `make tools` (its versions.env names the binaries)")
	out := flag.String("out", "", "folder of the archives (default <tools>/images)")
	address := flag.String("address", "", "containerd socket to import the images into (none: only build the archives)")
	namespace := flag.String("namespace", "k8s.io", "containerd namespace (k8s.io is the kubelet's)")
	flag.Parse()
	if err := run(*tools, *out, *address, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "kobe-images:", err)
		os.Exit(1)
	}
}

func run(toolsDir, out, address, namespace string) error {
	env, err := readEnv(filepath.Join(toolsDir, "versions.env"))
	if err != nil {
		return fmt.Errorf("%w (run `make tools`)", err)
	}
	for _, k := range []string{"KUBERNETES_VERSION", "KUBE_APISERVER", "KINE", "BUSYBOX"} {
		if env[k] == "" {
			return fmt.Errorf("versions.env has no %s (run `make tools`)", k)
		}
	}
	if out == "" {
		out = filepath.Join(toolsDir, "images")
	}
	programs, err := os.MkdirTemp("", "kobe-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(programs)
	in := images.Inputs{KubernetesVersion: env["KUBERNETES_VERSION"], KubeAPIServer: env["KUBE_APISERVER"],
		Kine: env["KINE"], Busybox: env["BUSYBOX"], ProgramDir: programs}
	if _, err := os.Stat(env["COREDNS"]); err == nil {
		in.CoreDNS, in.CoreDNSVersion = env["COREDNS"], env["COREDNS_VERSION"]
	}
	imgs, err := images.NodeImages(in)
	if err != nil {
		return err
	}
	im := images.Importer{Ctr: env["CTR"], Address: address, Namespace: namespace}
	if address != "" && im.Ctr == "" {
		return fmt.Errorf("versions.env has no CTR (run `make tools`)")
	}
	for _, img := range imgs {
		archive, err := images.Archive(img, out)
		if err != nil {
			return err
		}
		if address != "" {
			if err := im.Import(archive); err != nil {
				return err
			}
		}
		fmt.Printf("%s\t%s\n", img.Name, archive)
	}
	return nil
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, sc.Err()
}
