package images

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The images a real node of testsuite/hostcluster runs, under the names manifests use. docs/
// hostcluster.md lists them with their content.
const (
	// PauseName is the sandbox image containerd is configured with (pinned, never pulled).
	PauseName = "registry.k8s.io/pause:3.10"
	// BusyboxName is Debian's static busybox with a link for each applet.
	BusyboxName = "docker.io/library/busybox:1.36"
	// HTTPServerName is the test HTTP server (images/httpserver).
	HTTPServerName = "kobe.local/httpserver:v1"
)

// ControlPlaneName is the image with kube-apiserver and kine of a Kubernetes version.
func ControlPlaneName(kubernetesVersion string) string {
	return "kobe.local/controlplane:" + kubernetesVersion
}

// VClusterName is the vcluster syncer image of a vcluster version (0.34.0, no v), under the
// name the vcluster chart builds from kobe's values (registry kobe.local, repository
// vcluster, tag = the chart's version).
func VClusterName(version string) string { return "kobe.local/vcluster:" + version }

// VClusterKubernetesName is the distro image of a Kubernetes version that the vcluster chart's
// init container copies /binaries from (upstream: ghcr.io/loft-sh/kubernetes).
func VClusterKubernetesName(kubernetesVersion string) string {
	return "kobe.local/vcluster-kubernetes:" + kubernetesVersion
}

// CoreDNSName is the CoreDNS image of a CoreDNS version (e.g. v1.15.0).
func CoreDNSName(version string) string { return "registry.k8s.io/coredns/coredns:" + version }

// K3sName is the rancher/k3s image of a k3s version (v1.32.0+k3s1 → rancher/k3s:v1.32.0-k3s1), under
// the full name containerd resolves "rancher/k3s:…" to.
func K3sName(version string) string {
	return "docker.io/rancher/k3s:" + strings.ReplaceAll(version, "+", "-")
}

// Package paths of the programs built into images.
const (
	PauseProgram      = "github.com/kunobi-ninja/kobe/testsuite/hostcluster/images/pause"
	HTTPServerProgram = "github.com/kunobi-ninja/kobe/testsuite/hostcluster/images/httpserver"
)

// BuildProgram builds a main package of this module as a static binary at out. It must run
// inside the module (tests do: their working directory is their package's folder).
func BuildProgram(pkg, out string) error {
	// Without VCS stamping the binary, and so its image, changes only when its code does.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(buf.String()))
	}
	return nil
}

// Pause is the sandbox image: the pause program as /pause.
func Pause(pauseBinary string) Image {
	return Image{
		Name:       PauseName,
		Files:      []File{{Path: "/pause", Source: pauseBinary, Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	}
}

// Busybox is a shell image: busybox (a static build) as /bin/busybox and a link to it for each
// of its applets in /bin, a passwd file and a /tmp.
func Busybox(busyboxBinary string) (Image, error) {
	out, err := exec.Command(busyboxBinary, "--list").Output()
	if err != nil {
		return Image{}, fmt.Errorf("%s --list: %w", busyboxBinary, err)
	}
	files := []File{
		{Path: "/bin/busybox", Source: busyboxBinary, Mode: 0o755},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{Path: "/root", Dir: true, Mode: 0o700},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		files = append(files, File{Path: "/bin/" + applet, Link: "busybox"})
	}
	return Image{
		Name:  BusyboxName,
		Files: files,
		Cmd:   []string{"sh"},
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}, nil
}

// HTTPServer is the test server image: images/httpserver as /httpserver, listening on 8080.
func HTTPServer(httpserverBinary string) Image {
	return Image{
		Name:       HTTPServerName,
		Files:      []File{{Path: "/httpserver", Source: httpserverBinary, Mode: 0o755}, {Path: "/tmp", Dir: true, Mode: 0o1777}},
		Entrypoint: []string{"/httpserver"},
		Env:        []string{"PORT=8080"},
	}
}

// ControlPlane is the image of a control-plane pod (the shape vcluster and Kamaji run): the
// kube-apiserver and kine binaries in /usr/local/bin and no entrypoint; each container of the
// pod names its command.
func ControlPlane(kubernetesVersion, apiserverBinary, kineBinary string) Image {
	return Image{
		Name: ControlPlaneName(kubernetesVersion),
		Files: []File{
			{Path: "/usr/local/bin/kube-apiserver", Source: apiserverBinary, Mode: 0o755},
			{Path: "/usr/local/bin/kine", Source: kineBinary, Mode: 0o755},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
			{Path: "/var/lib/kine", Dir: true, Mode: 0o755},
		},
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	}
}

// VCluster is the syncer image, shaped as upstream's: /vcluster, entrypoint `vcluster start`.
// The chart mounts /binaries, /data, /tmp and /var/lib/vcluster (the config) as volumes.
func VCluster(version, syncerBinary string) Image {
	return Image{
		Name:       VClusterName(version),
		Files:      []File{{Path: "/vcluster", Source: syncerBinary, Mode: 0o755}, {Path: "/tmp", Dir: true, Mode: 0o1777}},
		Entrypoint: []string{"/vcluster", "start"},
	}
}

// VClusterKubernetes is the distro image of the vcluster chart's init container, shaped as
// upstream's loft-sh/kubernetes: the binaries the syncer starts in /kubernetes (kine,
// kube-apiserver, kube-controller-manager), and a cp (busybox) for the init container's
// `cp -r /kubernetes/. /binaries/`.
func VClusterKubernetes(kubernetesVersion, apiserverBinary, controllerManagerBinary, kineBinary, busyboxBinary string) Image {
	return Image{
		Name: VClusterKubernetesName(kubernetesVersion),
		Files: []File{
			{Path: "/kubernetes/kube-apiserver", Source: apiserverBinary, Mode: 0o755},
			{Path: "/kubernetes/kube-controller-manager", Source: controllerManagerBinary, Mode: 0o755},
			{Path: "/kubernetes/kine", Source: kineBinary, Mode: 0o755},
			{Path: "/bin/busybox", Source: busyboxBinary, Mode: 0o755},
			{Path: "/bin/cp", Link: "busybox"},
			{Path: "/bin/sh", Link: "busybox"},
		},
		Env: []string{"PATH=/bin"},
	}
}

// CoreDNS is the cluster DNS image: coredns as /coredns, its entrypoint, as in the upstream image.
func CoreDNS(version, corednsBinary string) Image {
	return Image{
		Name:       CoreDNSName(version),
		Files:      []File{{Path: "/coredns", Source: corednsBinary, Mode: 0o755}},
		Entrypoint: []string{"/coredns"},
	}
}

// K3s is the shape of the rancher/k3s image around a locally built k3s: /bin/k3s (its
// entrypoint, "agent" its default command, as upstream), the kubectl, crictl and ctr links to
// it, and a busybox for the shell tools upstream's image carries (k3s-root's), which the k3s
// backend's init container uses. The locally built k3s has no bundled containerd or runc
// (hack/build-k3s-tools.sh): in this image it runs `k3s server --disable-agent`.
func K3s(version, k3sBinary, busyboxBinary string) (Image, error) {
	bb, err := Busybox(busyboxBinary)
	if err != nil {
		return Image{}, err
	}
	// The locally built k3s links glibc dynamically (cgo: kine's SQLite); upstream links it
	// statically against musl. The image carries the libraries it names, as this machine has them.
	libs, err := SharedLibraries(k3sBinary)
	if err != nil {
		return Image{}, err
	}
	files := append([]File{{Path: "/bin/k3s", Source: k3sBinary, Mode: 0o755}}, libs...)
	for _, f := range bb.Files {
		switch f.Path {
		case "/bin/kubectl", "/bin/crictl", "/bin/ctr":
			continue
		}
		files = append(files, f)
	}
	for _, link := range []string{"kubectl", "crictl", "ctr"} {
		files = append(files, File{Path: "/bin/" + link, Link: "k3s"})
	}
	files = append(files,
		File{Path: "/etc/rancher", Dir: true, Mode: 0o755},
		File{Path: "/var/lib/rancher", Dir: true, Mode: 0o755},
		File{Path: "/var/log", Dir: true, Mode: 0o755},
	)
	return Image{
		Name:       K3sName(version),
		Files:      files,
		Entrypoint: []string{"/bin/k3s"},
		Cmd:        []string{"agent"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}, nil
}

// Inputs are the local files a real node's images are made of.
type Inputs struct {
	KubernetesVersion string
	// KubeAPIServer and Kine go into the control-plane image.
	KubeAPIServer, Kine string
	// Busybox is a static busybox binary (Debian's busybox-static: /bin/busybox).
	Busybox string
	// CoreDNS and its version (v1.15.0); empty: no CoreDNS image.
	CoreDNS, CoreDNSVersion string
	// K3s and its version (v1.32.0+k3s1); empty: no rancher/k3s image.
	K3s, K3sVersion string
	// ProgramDir receives the pause and httpserver programs, built from this module.
	ProgramDir string
	// VClusterSyncer (hack/build-vcluster-tools.sh) and its version (0.34.0), with
	// KubeControllerManager: the vcluster images; empty: none.
	VClusterSyncer, VClusterVersion, KubeControllerManager string
}

// NodeImages builds this module's programs into in.ProgramDir and returns every image of a
// real node: pause, busybox, the HTTP test server, the control plane and, if given, CoreDNS.
func NodeImages(in Inputs) ([]Image, error) {
	pause, httpserver := in.ProgramDir+"/pause", in.ProgramDir+"/httpserver"
	for pkg, out := range map[string]string{PauseProgram: pause, HTTPServerProgram: httpserver} {
		if err := BuildProgram(pkg, out); err != nil {
			return nil, err
		}
	}
	busybox, err := Busybox(in.Busybox)
	if err != nil {
		return nil, err
	}
	out := []Image{Pause(pause), busybox, HTTPServer(httpserver), ControlPlane(in.KubernetesVersion, in.KubeAPIServer, in.Kine)}
	if in.CoreDNS != "" {
		out = append(out, CoreDNS(in.CoreDNSVersion, in.CoreDNS))
	}
	if in.VClusterSyncer != "" {
		out = append(out, VCluster(in.VClusterVersion, in.VClusterSyncer),
			VClusterKubernetes(in.KubernetesVersion, in.KubeAPIServer, in.KubeControllerManager, in.Kine, in.Busybox))
	}
	if in.K3s != "" {
		k3s, err := K3s(in.K3sVersion, in.K3s, in.Busybox)
		if err != nil {
			return nil, err
		}
		out = append(out, k3s)
	}
	return out, nil
}

// SharedLibraries are the files a dynamically linked binary needs at run time (its ELF
// interpreter and the libraries ldd resolves), at the paths it looks for them, copied from this
// machine; none for a static binary.
func SharedLibraries(binary string) ([]File, error) {
	out, err := exec.Command("ldd", binary).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", binary, err, strings.TrimSpace(string(out)))
	}
	var files []File
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
		f := strings.Fields(line)
		var path string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			path = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			path = f[0]
		default:
			continue // linux-vdso.so.1: in the kernel
		}
		if seen[path] {
			continue
		}
		seen[path] = true
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, fmt.Errorf("%s needs %s: %w", binary, path, err)
		}
		files = append(files, File{Path: filepath.Clean(path), Source: real, Mode: 0o755})
	}
	return files, nil
}
