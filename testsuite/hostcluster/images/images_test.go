package images_test

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/testsuite/hostcluster/images"
)

// An archive is an OCI layout whose index names the image and whose one layer holds exactly
// the files asked for (parents created), with the config given.
func TestArchiveIsANamedOCILayout(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "prog")
	require.NoError(t, os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o755))
	img := images.Image{
		Name: "kobe.local/test:v1",
		Files: []images.File{
			{Path: "/usr/bin/prog", Source: src},
			{Path: "/bin/alias", Link: "/usr/bin/prog"},
			{Path: "/etc/motd", Data: []byte("hello\n")},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{"/usr/bin/prog"},
		Env:        []string{"A=b"},
	}
	archive, err := images.Archive(img, filepath.Join(dir, "cache"))
	require.NoError(t, err)
	again, err := images.Archive(img, filepath.Join(dir, "cache"))
	require.NoError(t, err)
	require.Equal(t, archive, again, "the same content reuses its archive")

	unpacked := filepath.Join(dir, "unpacked")
	require.NoError(t, os.MkdirAll(unpacked, 0o755))
	out, err := exec.Command("tar", "-xf", archive, "-C", unpacked).CombinedOutput()
	require.NoError(t, err, string(out))
	lp, err := layout.FromPath(unpacked)
	require.NoError(t, err)
	index, err := lp.ImageIndex()
	require.NoError(t, err)
	manifest, err := index.IndexManifest()
	require.NoError(t, err)
	require.Len(t, manifest.Manifests, 1)
	desc := manifest.Manifests[0]
	require.Equal(t, "kobe.local/test:v1", desc.Annotations["io.containerd.image.name"])
	require.Equal(t, "linux", desc.Platform.OS)

	v1img, err := index.Image(desc.Digest)
	require.NoError(t, err)
	cf, err := v1img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/bin/prog"}, cf.Config.Entrypoint)
	require.Equal(t, []string{"A=b"}, cf.Config.Env)
	layers, err := v1img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, hdr.Name)
		if hdr.Name == "bin/alias" {
			require.Equal(t, "/usr/bin/prog", hdr.Linkname)
		}
		if hdr.Name == "usr/bin/prog" {
			require.EqualValues(t, 0o755, hdr.Mode)
		}
	}
	sort.Strings(names)
	require.Equal(t, []string{"bin/", "bin/alias", "etc/", "etc/motd", "tmp/", "usr/", "usr/bin/", "usr/bin/prog"}, names)
}

func TestInvalidImagesAreRefused(t *testing.T) {
	for name, img := range map[string]images.Image{
		"no tag":        {Name: "kobe.local/test"},
		"relative path": {Name: "a/b:c", Files: []images.File{{Path: "bin/x", Data: []byte{}}}},
		"two kinds":     {Name: "a/b:c", Files: []images.File{{Path: "/x", Data: []byte{}, Link: "y"}}},
		"nothing":       {Name: "a/b:c", Files: []images.File{{Path: "/x"}}},
		"twice":         {Name: "a/b:c", Files: []images.File{{Path: "/x", Dir: true}, {Path: "/x", Dir: true}}},
	} {
		_, err := images.Archive(img, t.TempDir())
		require.Error(t, err, name)
	}
}
