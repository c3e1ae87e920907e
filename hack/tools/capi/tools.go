//go:build tools

// Package tools pins the main packages of the managers hack/build-capi-tools.sh builds, so that
// `go mod tidy` keeps everything they need in go.sum.
package tools

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
