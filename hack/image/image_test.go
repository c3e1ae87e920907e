package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeKobe builds a small static program that answers `version -o json` as kobe does, in
// place of the real binary (which takes minutes to link).
func fakeKobe(t *testing.T, version, commit string) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "version" {
		fmt.Println(` + "`" + `{"version":"` + version + `","commit":"` + commit + `","goVersion":"go","platform":"linux"}` + "`" + `)
		return
	}
	os.Exit(2)
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	bin := filepath.Join(dir, "kobe")
	cmd := exec.Command("go", "build", "-o", bin, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func fakeChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: vcluster\nversion: 0.34.0\n"), 0o666))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("{}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "a.yaml"), []byte("kind: ConfigMap\n"), 0o664))
	return dir
}

// layerFiles lists every entry of the image's layers by path.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		require.NoError(t, err)
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			files["/"+strings.TrimSuffix(hdr.Name, "/")] = hdr
		}
		require.NoError(t, rc.Close())
	}
	return files
}

// The image runs kobe as a non-root user, names its version, revision and source, holds the
// binary (0755), the CA bundle and the vcluster chart, and nothing in it is writable by other
// users; its layout and its archive both name it, and the archive holds the same image.
func TestImageIsNonRootAndLabelled(t *testing.T) {
	bin := fakeKobe(t, "v9.8.7", "0123456789abcdef")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"), 0o644))
	img, err := Build(Spec{Binary: bin, Version: "v9.8.7", Revision: "0123456789ab", Source: "https://example.com/kobe", CABundle: ca, VclusterChart: fakeChart(t)})
	require.NoError(t, err)
	out := t.TempDir()
	o, err := Write(img, "example.com/kobe:v9.8.7", out, "kobe-v9.8.7")
	require.NoError(t, err)

	// The layout: its index names the image as containerd and the OCI spec read it.
	lp, err := layout.FromPath(o.Layout)
	require.NoError(t, err)
	index, err := lp.ImageIndex()
	require.NoError(t, err)
	im, err := index.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	desc := im.Manifests[0]
	assert.Equal(t, "example.com/kobe:v9.8.7", desc.Annotations["io.containerd.image.name"])
	assert.Equal(t, "v9.8.7", desc.Annotations["org.opencontainers.image.ref.name"])
	got, err := index.Image(desc.Digest)
	require.NoError(t, err)

	cf, err := got.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{"/usr/local/bin/kobe"}, cf.Config.Entrypoint)
	assert.Empty(t, cf.Config.Cmd, "the command line picks the mode: server, worker, …")
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, map[string]string{
		"org.opencontainers.image.version":  "v9.8.7",
		"org.opencontainers.image.revision": "0123456789ab",
		"org.opencontainers.image.source":   "https://example.com/kobe",
		"org.opencontainers.image.title":    "kobe",
	}, cf.Config.Labels)
	assert.Contains(t, cf.Config.Env, "KOBE_VCLUSTER_CHART=/usr/share/kobe/charts/vcluster")
	assert.Contains(t, cf.Config.Env, "KOBE_VCLUSTER_CHART_VERSION=0.34.0")
	assert.Contains(t, cf.Config.Env, "KOBE_STATE_DIR=/var/lib/kobe")
	assert.Contains(t, cf.Config.Volumes, "/tmp")
	assert.Contains(t, cf.Config.Volumes, "/var/lib/kobe")

	files := layerFiles(t, got)
	kobe := files["/usr/local/bin/kobe"]
	require.NotNil(t, kobe, "the binary is in the image")
	assert.Equal(t, int64(0o755), kobe.Mode)
	assert.Equal(t, 0, kobe.Uid, "the binary is root's: the user kobe runs as cannot replace it")
	binData, err := os.ReadFile(bin)
	require.NoError(t, err)
	assert.Equal(t, int64(len(binData)), kobe.Size)
	for _, p := range []string{"/etc/passwd", "/etc/group", "/etc/ssl/certs/ca-certificates.crt",
		"/usr/share/kobe/charts/vcluster/Chart.yaml", "/usr/share/kobe/charts/vcluster/values.yaml", "/usr/share/kobe/charts/vcluster/templates/a.yaml"} {
		require.Contains(t, files, p)
		assert.Equal(t, int64(0o644), files[p].Mode, p)
	}
	for _, p := range []string{"/usr", "/usr/local", "/usr/local/bin", "/etc/ssl/certs", "/usr/share/kobe/charts"} {
		require.Contains(t, files, p, "the directories above the files are in the layers")
		assert.Equal(t, int64(0o755), files[p].Mode, p)
		assert.Equal(t, 0, files[p].Uid, p)
	}
	for _, p := range []string{"/tmp", "/var/lib/kobe", "/home/nonroot"} {
		require.Contains(t, files, p)
		assert.Equal(t, 65532, files[p].Uid, p)
	}
	for p, hdr := range files {
		assert.Zero(t, hdr.Mode&0o002, "%s is writable by others (mode %o)", p, hdr.Mode)
	}

	// The archive: the same layout in one tar file.
	unpacked := t.TempDir()
	af, err := os.Open(o.Archive)
	require.NoError(t, err)
	defer af.Close()
	tr := tar.NewReader(af)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		target := filepath.Join(unpacked, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			require.NoError(t, os.MkdirAll(target, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(target, data, 0o644))
	}
	fromArchive, err := layout.ImageIndexFromPath(unpacked)
	require.NoError(t, err)
	archived, err := fromArchive.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, im, archived, "the archive holds the same index: the same name, the same digest")

	// The same inputs give the same image.
	again, err := Build(Spec{Binary: bin, Version: "v9.8.7", Revision: "0123456789ab", Source: "https://example.com/kobe", CABundle: ca, VclusterChart: fakeChart(t)})
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, d2)
}

// An image would not say another version than its binary, nor carry a binary it cannot run.
func TestImageRefusesAMismatch(t *testing.T) {
	bin := fakeKobe(t, "v1.0.0", "abcdef012345")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, []byte("x"), 0o644))
	spec := Spec{Binary: bin, Version: "v1.0.1", Revision: "abcdef012345", Source: "https://example.com/kobe", CABundle: ca}
	_, err := Build(spec)
	require.ErrorContains(t, err, `the binary is version "v1.0.0", the image would say "v1.0.1"`)

	spec.Version, spec.Revision = "v1.0.0", "fedcba"
	_, err = Build(spec)
	require.ErrorContains(t, err, `the binary is commit "abcdef012345"`)

	spec.Revision, spec.Binary = "abcdef012345", ca
	_, err = Build(spec)
	require.ErrorContains(t, err, "not a Linux executable")

	_, err = Write(nil, "example.com/kobe", t.TempDir(), "x")
	require.ErrorContains(t, err, "want repository:tag")
}

// containerdTools are the containerd and ctr `make tools` built, from its versions.env; empty
// when they were not built.
func containerdTools() (containerd, ctr string) {
	dir := os.Getenv("KOBE_TOOLS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "tools")
	}
	data, err := os.ReadFile(filepath.Join(dir, "versions.env"))
	if err != nil {
		return "", ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "CONTAINERD":
			containerd = v
		case "CTR":
			ctr = v
		}
	}
	return containerd, ctr
}

// `ctr images import` reads the archive and holds the image under its name with the digest
// Write printed: what a node's containerd does with it before a pod runs it. Needs root and
// the containerd `make tools` builds (the real node's).
func TestArchiveImportsIntoContainerd(t *testing.T) {
	containerd, ctr := containerdTools()
	if containerd == "" || ctr == "" || os.Geteuid() != 0 {
		t.Skip("needs root and containerd from `make tools` (KOBE_TOOLS_DIR)")
	}
	bin := fakeKobe(t, "v9.8.7", "0123456789abcdef")
	img, err := Build(Spec{Binary: bin, Version: "v9.8.7", Revision: "0123456789ab", Source: "https://example.com/kobe", CABundle: bin})
	require.NoError(t, err)
	o, err := Write(img, "example.com/kobe:v9.8.7", t.TempDir(), "kobe")
	require.NoError(t, err)
	digest, err := img.Digest()
	require.NoError(t, err)

	// A containerd of its own: its root, state and socket in a temporary directory (short:
	// a unix socket path has a length limit), nothing but the image store.
	dir, err := os.MkdirTemp("", "ctrd-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	config := `version = 3
root = '` + dir + `/root'
state = '` + dir + `/state'
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.internal.v1.tracing', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', 'io.containerd.cri.v1.images']
[grpc]
  address = '` + dir + `/c.sock'
[ttrpc]
  address = '` + dir + `/c.sock.ttrpc'
[debug]
  address = ''
[metrics]
  address = ''
[plugins.'io.containerd.internal.v1.opt']
  path = '` + dir + `/opt'
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600))
	// The daemon writes its log to a file, read only once the daemon has failed to answer (a
	// strings.Builder here was read while exec's copier still wrote to it: a data race).
	logPath := filepath.Join(dir, "containerd.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { logFile.Close() })
	daemon := exec.Command(containerd, "--config", filepath.Join(dir, "config.toml"))
	daemon.Stdout, daemon.Stderr = logFile, logFile
	require.NoError(t, daemon.Start())
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	socket := filepath.Join(dir, "c.sock")
	ctrCmd := func(args ...string) (string, error) {
		out, err := exec.Command(ctr, append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	var out string
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if out, err = ctrCmd("version"); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			logged, _ := os.ReadFile(logPath)
			t.Fatalf("containerd did not answer: %s\n%s", out, logged)
		}
	}
	out, err = ctrCmd("images", "import", o.Archive)
	require.NoError(t, err, out)
	out, err = ctrCmd("images", "list")
	require.NoError(t, err, out)
	assert.Regexp(t, `example.com/kobe:v9.8.7\s+application/vnd.oci.image.manifest.v1\+json\s+`+digest.String(), out)
}
