package vcluster

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
)

// docs/backends/vcluster.md says, resource by resource, what is synced; the chart's values (its
// defaults under kobe's) say what the syncer will do. They must agree, and the page must name
// every sync.toHost / sync.fromHost resource the chart has.
func TestFidelityContractMatchesTheChartValues(t *testing.T) {
	dir, version := ToolsChart(local.DefaultToolsDir())
	if dir == "" {
		t.Skipf("no vcluster chart in %s/versions.env: run `make tools` (hack/build-vcluster-tools.sh)", local.DefaultToolsDir())
	}
	c, err := loader.Load(dir)
	require.NoError(t, err)
	require.Equal(t, version, c.Metadata.Version)

	b := &Backend{}
	vals := b.values(backends.InstanceSpec{KubernetesVersion: "v1.37.2"}, Options{})
	require.NoError(t, checkValues(c, vals), "kobe's values pass the chart's schema")
	merged, err := chartutil.CoalesceValues(c, vals)
	require.NoError(t, err)

	doc, err := os.ReadFile("../../docs/backends/vcluster.md")
	require.NoError(t, err)
	rows := syncTable(t, string(doc))

	inChart := map[string]string{}
	for _, dir := range []string{"toHost", "fromHost"} {
		section, ok := valueAt(merged, "sync", dir)
		require.True(t, ok, "sync.%s in the chart's values", dir)
		for res, v := range section.(map[string]any) {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			enabled, ok := m["enabled"]
			if !ok {
				continue // e.g. customResources: a map of names, not one switch
			}
			inChart[dir+" "+res] = synced(enabled)
		}
	}
	var missing, extra []string
	for k, want := range inChart {
		got, ok := rows[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		assert.Equal(t, want, got, "docs/backends/vcluster.md says %s is synced %q; the chart's values say %q", k, got, want)
	}
	for k := range rows {
		if _, ok := inChart[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	assert.Empty(t, missing, "resources the chart can sync that the page does not name")
	assert.Empty(t, extra, "rows of the page the chart has no switch for")

	// What the page says of kobe's own values.
	repo, _ := valueAt(merged, "controlPlane", "statefulSet", "image", "repository")
	assert.Equal(t, "vcluster", repo, "the OSS syncer image, not vcluster-pro")
	tel, _ := valueAt(merged, "telemetry", "enabled")
	assert.Equal(t, false, tel)
	sa, _ := valueAt(merged, "sync", "toHost", "serviceAccounts", "enabled")
	assert.Equal(t, false, sa, "the cloud identity paragraph relies on service accounts not being synced")
}

func synced(v any) string {
	switch v {
	case true:
		return "yes"
	case false:
		return "no"
	}
	return fmt.Sprint(v)
}

// syncTable reads the rows between the sync-table markers: "direction resource" → synced.
func syncTable(t *testing.T, doc string) map[string]string {
	begin := strings.Index(doc, "<!-- sync-table:begin -->")
	end := strings.Index(doc, "<!-- sync-table:end -->")
	require.True(t, begin >= 0 && end > begin, "docs/backends/vcluster.md has the sync-table markers")
	rows := map[string]string{}
	for _, line := range strings.Split(doc[begin:end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		dir, res, syn := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])
		if dir == "direction" || strings.HasPrefix(dir, "---") {
			continue
		}
		key := dir + " " + res
		require.NotContains(t, rows, key, "row %s twice", key)
		rows[key] = syn
	}
	return rows
}
