//go:build tools

// Package tools pins the Prometheus Operator's monitoring/v1 types, so that `go mod tidy` keeps
// in go.sum everything controller-gen loads to generate their CRDs (deploy/helm's dry-run test).
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)
