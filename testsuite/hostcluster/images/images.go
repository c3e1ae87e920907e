// Package images builds container images from files on this machine and imports them into a
// containerd under exact names. There is no registry here: every image a real node runs (the
// pause image, busybox, test servers, control-plane images) is made from local binaries with
// go-containerregistry, written as an OCI archive and imported with `ctr images import`, so that
// manifests naming e.g. registry.k8s.io/pause:3.10 run unchanged.
package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is one image to build: its exact name and what goes into its single layer.
type Image struct {
	// Name is the reference the image is imported as, e.g. "registry.k8s.io/pause:3.10".
	Name string
	// Files of the image's layer. Parent directories are created as needed.
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// User the processes run as ("" = root), e.g. "65532".
	User string
}

// File is one entry of an image: a copy of a local file (Source), literal content (Data), a
// symbolic link (Link) or a directory (Dir).
type File struct {
	// Path inside the image, absolute: "/bin/busybox".
	Path   string
	Source string
	Data   []byte
	Link   string
	Dir    bool
	// Mode of a file or directory; 0 takes the source file's mode (0o644 for Data, 0o755 for Dir).
	Mode fs.FileMode
}

// Validate refuses an image that could not be built as described.
func (img Image) Validate() error {
	if img.Name == "" || !strings.Contains(img.Name, ":") || strings.Contains(img.Name, " ") {
		return fmt.Errorf("image name %q: want a full reference with a tag (registry/repository:tag)", img.Name)
	}
	seen := map[string]bool{}
	for _, f := range img.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return fmt.Errorf("image %s: file path %q must be absolute and clean", img.Name, f.Path)
		}
		kinds := 0
		for _, set := range []bool{f.Source != "", f.Data != nil, f.Link != "", f.Dir} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return fmt.Errorf("image %s: %s must be exactly one of a source file, data, a link or a directory", img.Name, f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("image %s: %s listed twice", img.Name, f.Path)
		}
		seen[f.Path] = true
	}
	return nil
}

// Key identifies what the image would contain: its name, its config and each file. An archive
// built for the same key is reused.
func (img Image) Key() (string, error) {
	h := sha256.New()
	cfg, _ := json.Marshal([]any{img.Name, img.Entrypoint, img.Cmd, img.Env, img.WorkingDir, img.User})
	h.Write(cfg)
	for _, f := range img.Files {
		fmt.Fprintf(h, "\x00%s|%s|%s|%v|%o|", f.Path, f.Source, f.Link, f.Dir, f.Mode)
		h.Write(f.Data)
		if f.Source != "" {
			st, err := os.Stat(f.Source)
			if err != nil {
				return "", fmt.Errorf("image %s: %w", img.Name, err)
			}
			// Small files (programs `go build` rewrites on every run) by content, big ones (the
			// cached Kubernetes binaries) by size and time: hashing those would cost seconds.
			if st.Size() < 32<<20 {
				data, err := os.ReadFile(f.Source)
				if err != nil {
					return "", err
				}
				h.Write(data)
			} else {
				fmt.Fprintf(h, "%d|%d", st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// ArchiveName is the file name of the image's archive in a cache directory.
func (img Image) ArchiveName() (string, error) {
	key, err := img.Key()
	if err != nil {
		return "", err
	}
	safe := strings.NewReplacer("/", "_", ":", "_").Replace(img.Name)
	return safe + "-" + key + ".tar", nil
}

// Archive returns the OCI archive of img in dir, building it when no archive of the same
// content exists there yet.
func Archive(img Image, dir string) (string, error) {
	if err := img.Validate(); err != nil {
		return "", err
	}
	name, err := img.ArchiveName()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := WriteArchive(img, out); err != nil {
		return "", err
	}
	// Older archives of the same image are stale: remove them so the cache does not grow.
	prefix := strings.TrimSuffix(name, name[strings.LastIndex(name, "-"):])
	old, _ := filepath.Glob(filepath.Join(dir, prefix+"-*.tar"))
	for _, o := range old {
		if o != out {
			os.Remove(o)
		}
	}
	return out, nil
}

// WriteArchive builds img and writes it to file as a tar of an OCI image layout whose index
// names the image (annotation io.containerd.image.name, which `ctr images import` tags it with).
// The file appears complete or not at all.
func WriteArchive(img Image, file string) error {
	if err := img.Validate(); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(file), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	layerTar := filepath.Join(work, "layer.tar")
	if err := writeLayer(img, layerTar); err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	layer, err := newFileLayer(layerTar)
	if err != nil {
		return err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	v1img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return err
	}
	cf, err := v1img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = img.Entrypoint
	cf.Config.Cmd = img.Cmd
	cf.Config.Env = img.Env
	cf.Config.WorkingDir = img.WorkingDir
	cf.Config.User = img.User
	v1img, err = mutate.ConfigFile(v1img, cf)
	if err != nil {
		return err
	}

	layoutDir := filepath.Join(work, "layout")
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return err
	}
	tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
	if err := lp.AppendImage(v1img,
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
		layout.WithAnnotations(map[string]string{
			"io.containerd.image.name":          img.Name,
			"org.opencontainers.image.ref.name": tag,
		})); err != nil {
		return fmt.Errorf("image %s: writing the layout: %w", img.Name, err)
	}
	tmp := file + ".tmp"
	if err := tarDir(layoutDir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// writeLayer writes the image's files as an uncompressed tar, parents first, with fixed
// owners and times so that the same inputs give the same layer digest.
func writeLayer(img Image, file string) error {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	written := map[string]bool{}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if dir == "/" || written[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		written[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
	}
	files := append([]File{}, img.Files...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if err := mkdirs(path.Dir(f.Path)); err != nil {
			return err
		}
		name := strings.TrimPrefix(f.Path, "/")
		hdr := &tar.Header{Name: name, ModTime: time.Unix(0, 0), Mode: int64(f.Mode.Perm())}
		switch {
		case f.Dir:
			if written[f.Path] {
				continue
			}
			written[f.Path] = true
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
			if hdr.Mode == 0 {
				hdr.Mode = 0o755
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Data != nil:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
			if hdr.Mode == 0 {
				hdr.Mode = 0o644
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(f.Data); err != nil {
				return err
			}
		default:
			if err := copyInto(tw, hdr, f.Source); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}

func copyInto(tw *tar.Writer, hdr *tar.Header, source string) error {
	in, err := os.Open(source)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", source)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
	if hdr.Mode == 0 {
		hdr.Mode = int64(st.Mode().Perm())
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// tarDir writes the files under dir (an OCI layout) into a tar file, paths relative to dir.
func tarDir(dir, file string) error {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
			return tw.WriteHeader(hdr)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}

// fileLayer is an uncompressed layer read from a tar file. go-containerregistry's own file
// layers gzip their content (twice: once for the digest, once to write it); the node reads
// uncompressed layers as well and hundreds of megabytes of binaries import faster without.
type fileLayer struct {
	file   string
	digest v1.Hash
	size   int64
}

func newFileLayer(file string) (*fileLayer, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	digest, size, err := v1.SHA256(f)
	if err != nil {
		return nil, err
	}
	return &fileLayer{file: file, digest: digest, size: size}, nil
}

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.file) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.file) }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return types.OCIUncompressedLayer, nil }

// Importer imports archives into one containerd through its ctr binary.
type Importer struct {
	// Ctr is the ctr binary, Address containerd's socket.
	Ctr, Address string
	// Namespace is containerd's namespace; the CRI plugin (kubelet's view) uses "k8s.io".
	Namespace string
}

// Import imports the archive and unpacks it for the default snapshotter, so that the image is
// present under its exact name for the kubelet.
func (im Importer) Import(archive string) error {
	ns := im.Namespace
	if ns == "" {
		ns = "k8s.io"
	}
	cmd := exec.Command(im.Ctr, "--address", im.Address, "--namespace", ns, "images", "import", "--local", archive)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", filepath.Base(archive), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Names lists the image names containerd holds in the importer's namespace.
func (im Importer) Names() ([]string, error) {
	ns := im.Namespace
	if ns == "" {
		ns = "k8s.io"
	}
	out, err := exec.Command(im.Ctr, "--address", im.Address, "--namespace", ns, "images", "list", "--quiet").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("ctr images list: %v: %s", err, ee.Stderr)
		}
		return nil, err
	}
	return strings.Fields(string(out)), nil
}
