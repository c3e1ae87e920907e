package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// Where things live in the image. The state directory and /tmp are the only places kobe
// writes; a pod mounts volumes (emptyDir) there and keeps the root filesystem read-only.
const (
	binaryPath  = "/usr/local/bin/kobe"
	chartPath   = "/usr/share/kobe/charts/vcluster"
	stateDir    = "/var/lib/kobe"
	homeDir     = "/home/nonroot"
	tmpDir      = "/tmp"
	caBundle    = "/etc/ssl/certs/ca-certificates.crt"
	nonrootUID  = 65532
	nonrootName = "nonroot"
)

// Labels of the image (the OCI annotation keys, used as config labels).
const (
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelTitle    = "org.opencontainers.image.title"
)

// epoch is the time of every file and of the config: the same inputs give the same digests.
var epoch = time.Unix(0, 0).UTC()

// Spec is what goes into kobe's image.
type Spec struct {
	// Binary is kobe, built for Linux without cgo (the image has no C library).
	Binary string
	// Version and Revision must be what the binary says in `kobe version -o json`: the image's
	// labels and tag are checked against the binary they carry.
	Version, Revision string
	// Source is the repository URL of the source label.
	Source string
	// CABundle is the PEM bundle of certificate authorities copied to /etc/ssl/certs (Go reads
	// it there): the host clusters, Temporal and the store may be reached over TLS.
	CABundle string
	// VclusterChart is the directory of the vcluster Helm chart the vcluster backend installs
	// ($KOBE_VCLUSTER_CHART in the image); empty: none (the backend then needs
	// $KOBE_VCLUSTER_CHART set to an oci:// or https:// source at run time).
	VclusterChart string
}

// binaryVersion is what `kobe version -o json` prints.
type binaryVersion struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// Build makes the image: a base layer (the non-root user, the CA bundle, the writable
// directories), the vcluster chart, then the binary, on an empty base.
func Build(s Spec) (v1.Image, error) {
	if s.Binary == "" || s.Version == "" || s.Revision == "" || s.Source == "" || s.CABundle == "" {
		return nil, errors.New("binary, version, revision, source and CA bundle are all required")
	}
	arch, err := staticLinuxBinary(s.Binary)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(s); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(s.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	base := []entry{
		{path: "/etc/passwd", data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", nonrootName, nonrootUID, nonrootUID, nonrootName, homeDir))},
		{path: "/etc/group", data: []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonrootName, nonrootUID))},
		{path: caBundle, data: ca},
		// Owned by the user kobe runs as, and by nobody else: writable when no volume is mounted
		// (a plain `docker run`), never by other users.
		{path: tmpDir, dir: true, mode: 0o700, owner: nonrootUID},
		{path: stateDir, dir: true, mode: 0o700, owner: nonrootUID},
		{path: homeDir, dir: true, mode: 0o700, owner: nonrootUID},
	}
	env := []string{
		"PATH=/usr/local/bin",
		"HOME=" + homeDir,
		// kobe worker's (and kobe dev's) --state-dir.
		"KOBE_STATE_DIR=" + stateDir,
	}
	// Layers in the order they change least often: a new binary leaves the others as they were.
	type layerSpec struct {
		what  string // the history's created_by
		files []entry
	}
	layers := []layerSpec{{"the nonroot user, CA certificates, writable directories", base}}
	if s.VclusterChart != "" {
		chart, version, err := chartEntries(s.VclusterChart)
		if err != nil {
			return nil, err
		}
		layers = append(layers, layerSpec{"the vcluster chart " + version, chart})
		env = append(env, "KOBE_VCLUSTER_CHART="+chartPath, "KOBE_VCLUSTER_CHART_VERSION="+version)
	}
	layers = append(layers, layerSpec{"kobe " + s.Version, []entry{{path: binaryPath, source: s.Binary, mode: 0o755}}})

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		layer, err := newLayer(l.files)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image: " + l.what}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = fmt.Sprintf("%d:%d", nonrootUID, nonrootUID)
	cf.Config.Entrypoint = []string{binaryPath}
	cf.Config.Env = env
	cf.Config.WorkingDir = homeDir
	cf.Config.Volumes = map[string]struct{}{tmpDir: {}, stateDir: {}}
	cf.Config.Labels = map[string]string{
		labelVersion:  s.Version,
		labelRevision: s.Revision,
		labelSource:   s.Source,
		labelTitle:    "kobe",
	}
	return mutate.ConfigFile(img, cf)
}

// staticLinuxBinary refuses a file that is not a Linux executable without a dynamic loader
// (the image has none), and returns its architecture in Go's names.
func staticLinuxBinary(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", fmt.Errorf("binary %s: not a Linux executable: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary %s is linked dynamically (build it with CGO_ENABLED=0): the image has no C library", file)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("binary %s: architecture %s is not one kobe builds images for (amd64, arm64)", file, f.Machine)
}

// checkVersion runs the binary's `version -o json` and refuses an image whose labels would
// say another version or commit than the binary does.
func checkVersion(s Spec) error {
	out, err := exec.Command(s.Binary, "version", "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("%s version -o json: %w (an image is built on a machine of its architecture)", s.Binary, err)
	}
	var got binaryVersion
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("%s version -o json: %w", s.Binary, err)
	}
	if got.Version != s.Version {
		return fmt.Errorf("the binary is version %q, the image would say %q: build both from the same VERSION", got.Version, s.Version)
	}
	sameCommit := got.Commit != "" && (strings.HasPrefix(got.Commit, s.Revision) || strings.HasPrefix(s.Revision, got.Commit))
	if !sameCommit {
		return fmt.Errorf("the binary is commit %q, the image would say %q: build both from the same COMMIT", got.Commit, s.Revision)
	}
	return nil
}

// chartEntries are the files of the chart directory under chartPath, readable by all and
// writable by none but root, and the chart's version from its Chart.yaml.
func chartEntries(dir string) ([]entry, string, error) {
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, "", fmt.Errorf("vcluster chart: %w", err)
	}
	var chart struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(meta, &chart); err != nil {
		return nil, "", fmt.Errorf("vcluster chart %s: Chart.yaml: %w", dir, err)
	}
	if chart.Name != "vcluster" || chart.Version == "" {
		return nil, "", fmt.Errorf("vcluster chart %s: Chart.yaml names %q version %q, want the vcluster chart with a version", dir, chart.Name, chart.Version)
	}
	var files []entry
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		target := path.Join(chartPath, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			files = append(files, entry{path: target, dir: true, mode: 0o755})
		case d.Type().IsRegular():
			files = append(files, entry{path: target, source: p, mode: 0o644})
		default:
			return fmt.Errorf("vcluster chart: %s is neither a file nor a directory", p)
		}
		return nil
	})
	return files, strings.TrimPrefix(chart.Version, "v"), err
}

// entry is one file or directory of a layer, owned by root unless owner is set.
type entry struct {
	path   string
	dir    bool
	data   []byte
	source string
	mode   fs.FileMode
	owner  int
}

// withParents adds the directories above the entries that are not listed themselves (root's,
// 0755), and sorts the whole by path: a directory comes before what it holds.
func withParents(files []entry) []entry {
	listed := map[string]bool{}
	for _, f := range files {
		listed[f.path] = true
	}
	for _, f := range files {
		for dir := path.Dir(f.path); dir != "/" && !listed[dir]; dir = path.Dir(dir) {
			listed[dir] = true
			files = append(files, entry{path: dir, dir: true, mode: 0o755})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files
}

// newLayer writes the entries (and the directories above them) as a tar and makes it a gzip
// layer. The tar is kept in memory: the largest layer is the binary.
func newLayer(files []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range withParents(files) {
		hdr := &tar.Header{Name: f.path[1:], Mode: int64(f.mode.Perm()), Uid: f.owner, Gid: f.owner, ModTime: epoch, Format: tar.FormatPAX}
		if f.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			continue
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		data := f.data
		if f.source != "" {
			var err error
			if data, err = os.ReadFile(f.source); err != nil {
				return nil, err
			}
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	content := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
}

// Outputs are the files Write made.
type Outputs struct {
	// Layout is an OCI image layout directory holding the image under its name.
	Layout string
	// Archive is the same layout as one tar file (an OCI archive): `ctr images import`,
	// `docker load` (Docker 25 and later) and `podman load` read it and name the image from
	// its index, keeping the manifest's digest.
	Archive string
}

// Write writes img, named ref (repository:tag), as <dir>/<base>.oci (an OCI layout) and
// <dir>/<base>.tar (that layout in a tar), replacing earlier ones.
func Write(img v1.Image, ref, dir, base string) (Outputs, error) {
	tag, err := parseTag(ref)
	if err != nil {
		return Outputs{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Outputs{}, err
	}
	out := Outputs{Layout: filepath.Join(dir, base+".oci"), Archive: filepath.Join(dir, base+".tar")}
	if err := os.RemoveAll(out.Layout); err != nil {
		return Outputs{}, err
	}
	lp, err := layout.Write(out.Layout, empty.Index)
	if err != nil {
		return Outputs{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Outputs{}, err
	}
	if err := lp.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture}),
		layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": tag.TagStr(),
			// containerd names an image of a layout by this annotation.
			"io.containerd.image.name": tag.Name(),
		})); err != nil {
		return Outputs{}, fmt.Errorf("writing %s: %w", out.Layout, err)
	}
	return out, archiveLayout(out.Layout, out.Archive)
}

// archiveLayout puts the layout directory's files into a tar file, written beside and renamed:
// a reader never sees half an archive.
func archiveLayout(layoutDir, file string) error {
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // after the rename there is nothing left to remove
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(layoutDir)); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// parseTag parses a reference that names its tag: an image without one would be "latest",
// which says nothing about the version it holds.
func parseTag(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image name %q: want repository:tag (%v)", ref, err)
	}
	return tag, nil
}
