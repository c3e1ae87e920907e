package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcFiles(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n"
	assert.Equal(t, "Intel(R) Xeon(R) CPU @ 2.20GHz", ParseCPUModel(cpuinfo))
	assert.Equal(t, "", ParseCPUModel("processor\t: 0\n"))

	meminfo := "MemTotal:       24572988 kB\nMemFree:         1000 kB\n"
	assert.Equal(t, int64(24572988), ParseMeminfoKiB(meminfo, "MemTotal"))
	assert.Equal(t, int64(0), ParseMeminfoKiB(meminfo, "MemAvailable"))
	status := "Name:\tkube-apiserver\nVmRSS:\t  215000 kB\n"
	assert.Equal(t, int64(215000), ParseMeminfoKiB(status, "VmRSS"))
	rollup := "55b0-7ffc ---p 00000000 00:00 0 [rollup]\nRss:                1748 kB\nPss:                 246 kB\nPss_Dirty:           112 kB\n"
	assert.Equal(t, int64(246), ParseMeminfoKiB(rollup, "Pss"), "Pss, not Pss_Dirty")

	assert.Equal(t, [3]float64{3.24, 3.26, 2.28}, ParseLoadAvg("3.24 3.26 2.28 3/512 24842\n"))
	assert.Equal(t, [3]float64{}, ParseLoadAvg(""))
}

func TestAverageMemory(t *testing.T) {
	m := averageMemory(2, 2*1024*100, 2*1024*80,
		map[string]int64{"kube-apiserver": 2 * 1024 * 70, "kine": 2 * 1024 * 30},
		map[string]int64{"kube-apiserver": 2 * 1024 * 60, "kine": 2 * 1024 * 20})
	assert.Equal(t, 2, m.Instances)
	assert.Equal(t, 100.0, m.RSSMiB)
	assert.Equal(t, 80.0, m.PSSMiB)
	assert.Equal(t, []string{"kine", "kube-apiserver"}, m.Components)
	assert.Equal(t, 70.0, m.RSSMiBByComponent["kube-apiserver"])
	assert.Equal(t, 20.0, m.PSSMiBByComponent["kine"])
}

func TestNewestVersion(t *testing.T) {
	assert.Equal(t, "v1.37.2", NewestVersion([]string{"v1.9.11", "v1.37.2"}))
	assert.Equal(t, "v1.37.10", NewestVersion([]string{"v1.37.10", "v1.9.11", "v1.37.2"}), "numbers, not strings")
	assert.Equal(t, "", NewestVersion(nil))
}

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (kube apiserver (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 0 0\n"
	d, err := ParseStatCPU(stat)
	assert.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, d, "utime 250 + stime 75 ticks of 10 ms")
	_, err = ParseStatCPU("garbage")
	assert.Error(t, err)
}

func TestParseStatState(t *testing.T) {
	state, err := ParseStatState("4242 (kube apiserver) (x)) T 1 4242 4242 0 -1 4194560")
	require.NoError(t, err)
	assert.Equal(t, "T", state, "the fields after the name's last ')'")
	_, err = ParseStatState("garbage")
	assert.Error(t, err)
	_, err = ParseStatState("1 (x)")
	assert.Error(t, err)
}

func TestParseHostCPU(t *testing.T) {
	stat := "cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 0 0\nintr 1 2 3\n"
	busy, total, err := ParseHostCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	// busy: user nice system irq softirq steal; idle and iowait are not busy; guest is in user.
	if busy != 100+5+50+3+2+0 || total != 100+5+50+800+40+3+2+0 {
		t.Fatalf("busy %d total %d", busy, total)
	}
	if _, _, err := ParseHostCPU("intr 1 2\n"); err == nil {
		t.Fatal("no cpu line: want an error")
	}
}
