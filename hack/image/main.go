// Command image builds kobe's container image from a kobe binary, with go-containerregistry:
// no Docker daemon, no registry. `make images` runs it; docs/production.md says what the image
// holds and how to load it.
//
//	go run ./hack/image -binary build/images/kobe -version v0.1.0 -revision 0123456789ab \
//	  -vcluster-chart ~/.cache/kobe/tools/vcluster-v0.34.0/chart -out build/images
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var s Spec
	repository := flag.String("repository", "ghcr.io/kunobi-ninja/kobe", "image repository; the tag is the version")
	out := flag.String("out", "build/images", "directory of the image's OCI layout (kobe-<version>.oci) and archive (kobe-<version>.tar)")
	flag.StringVar(&s.Binary, "binary", "", "kobe, built for Linux with CGO_ENABLED=0 (required)")
	flag.StringVar(&s.Version, "version", "", "the binary's version, as `kobe version` prints it (required)")
	flag.StringVar(&s.Revision, "revision", "", "the binary's commit (required)")
	flag.StringVar(&s.Source, "source", "https://github.com/kunobi-ninja/kobe", "repository URL of the source label")
	flag.StringVar(&s.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of certificate authorities the image trusts")
	flag.StringVar(&s.VclusterChart, "vcluster-chart", "", "directory of the vcluster Helm chart the vcluster backend installs (empty: none in the image)")
	flag.Parse()
	if flag.NArg() != 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	img, err := Build(s)
	if err != nil {
		fail(err)
	}
	ref := *repository + ":" + s.Version
	o, err := Write(img, ref, *out, "kobe-"+s.Version)
	if err != nil {
		fail(err)
	}
	digest, err := img.Digest()
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s %s\n  OCI layout: %s\n  archive:    %s (ctr images import, docker load)\n", ref, digest, o.Layout, o.Archive)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
