package vcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// Options is spec.backend.vcluster of a pool (the upstream shape: chartVersion and values,
// plus chart, the source):
//
//	backend:
//	  type: vcluster
//	  vcluster:
//	    chart: oci://ghcr.io/loft-sh/charts/vcluster   # optional: the operator's chart by default
//	    chartVersion: 0.34.0                           # optional: the operator's pinned version
//	    values: |                                      # optional: merged over the operator's values
//	      sync:
//	        toHost:
//	          ingresses:
//	            enabled: true
type Options struct {
	// Chart is where the chart comes from: an OCI reference (oci://registry/repo/vcluster), an
	// https chart repository (https://charts.example.com, chart name vcluster), or an absolute
	// path to a chart directory or .tgz on the worker. Empty: the operator's (Config.Chart).
	Chart string `json:"chart,omitempty"`
	// ChartVersion is the chart's version; empty: the operator's pinned version. A local chart
	// must carry this version.
	ChartVersion string `json:"chartVersion,omitempty"`
	// Values are Helm values, a YAML document (or an object), merged over the operator's.
	Values json.RawMessage `json:"values,omitempty"`

	// values is Values parsed.
	values map[string]any
}

// Chart source kinds.
const (
	sourceLocal = "local"
	sourceOCI   = "oci"
	sourceRepo  = "repository"
)

// sourceKind classifies a chart source, or says why it is not one.
func sourceKind(src string) (string, error) {
	switch {
	case strings.HasPrefix(src, "oci://"):
		if len(src) <= len("oci://") || !strings.Contains(strings.TrimPrefix(src, "oci://"), "/") {
			return "", fmt.Errorf("%q: an OCI reference names a registry and a repository, e.g. oci://ghcr.io/loft-sh/charts/vcluster", src)
		}
		return sourceOCI, nil
	case strings.HasPrefix(src, "https://"), strings.HasPrefix(src, "http://"):
		return sourceRepo, nil
	case filepath.IsAbs(src):
		return sourceLocal, nil
	}
	return "", fmt.Errorf("%q: want an oci:// reference, an https:// chart repository or an absolute path to a chart", src)
}

// versionPattern is a chart version as Helm charts carry them (SemVer 2, no leading v).
var versionPattern = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// ParseOptions reads spec.backend.vcluster. Unknown fields are refused (a field kobe would
// ignore is an error), and values that are not YAML are refused with their line.
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return o, fmt.Errorf("spec.backend.vcluster: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if o.Chart != "" {
		if _, err := sourceKind(o.Chart); err != nil {
			return o, fmt.Errorf("spec.backend.vcluster.chart: %w", err)
		}
	}
	if o.ChartVersion != "" && !versionPattern.MatchString(o.ChartVersion) {
		return o, fmt.Errorf("spec.backend.vcluster.chartVersion: %q is not a chart version such as 0.34.0", o.ChartVersion)
	}
	vals, err := parseValues(o.Values)
	if err != nil {
		return o, fmt.Errorf("spec.backend.vcluster.values: %w", err)
	}
	o.values = vals
	return o, nil
}

// parseValues reads values given as a YAML document in a string (values: |) or as an object.
// A YAML error names its line, counted from the first line of the values.
func parseValues(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	var doc []byte
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		doc = []byte(s)
	case '{':
		doc = raw
	default:
		return nil, errors.New("must be a YAML document (values: |) or a mapping")
	}
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, yamlError(err)
	}
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("must be a mapping of Helm values, not a %T", v)
	}
}

// yamlError shortens sigs.k8s.io/yaml's message to what the user needs: "line N: what".
func yamlError(err error) error {
	msg := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "yaml: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if !strings.HasPrefix(msg, "line ") {
		msg = "not valid YAML: " + msg
	}
	return errors.New(msg)
}

// mergeValues returns base with over merged into it, as Helm merges values files
// (chartutil.MergeTables): mappings key by key, anything else (lists included) replaced, a null
// kept so that Helm drops the chart's default under it. Neither argument is modified.
func mergeValues(base, over map[string]any) map[string]any {
	dst, _ := copyValue(over).(map[string]any)
	src, _ := copyValue(base).(map[string]any)
	if dst == nil {
		dst = map[string]any{}
	}
	return chartutil.MergeTables(dst, src)
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = copyValue(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = copyValue(x)
		}
		return out
	}
	return v
}

// valueAt reads a nested value ("a", "b", "c" for a.b.c); ok is false when a step is missing.
func valueAt(m map[string]any, path ...string) (any, bool) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}
