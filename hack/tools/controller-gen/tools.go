//go:build tools

// Package tools pins controller-gen's main package, so that `go mod tidy` keeps everything
// hack/build-controller-gen.sh needs in go.sum.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
