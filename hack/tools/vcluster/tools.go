//go:build tools

// Package tools pins the vcluster syncer's main package, so that `go mod tidy` keeps everything
// hack/build-vcluster-tools.sh needs in go.sum.
package tools

import (
	_ "github.com/loft-sh/vcluster/cmd/vcluster"
)
