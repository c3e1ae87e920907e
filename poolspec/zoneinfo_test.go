package poolspec

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zoneChildEnv marks the run of TestWindowEndIgnoresTheHostsZoneRules in a child process.
const zoneChildEnv = "KOBE_TEST_ZONE_CHILD"

// The end of a warm window is computed from the zone rules in kobe's binary, whatever the host
// has: a child process whose ZONEINFO points at a zoneinfo.zip in which Europe/Berlin has New
// York's rules (which change their clocks three weeks earlier) computes the same end as this
// process, and does not accept a zone only that file knows. The child is a process of its own
// because Go reads ZONEINFO once per process.
func TestWindowEndIgnoresTheHostsZoneRules(t *testing.T) {
	w := WarmWindowPolicy{Cron: "0 20 * * *", Duration: 12 * time.Hour, Timezone: "Europe/Berlin"}
	// 20:00 in Berlin the evening before its clocks go forward (New York's went three weeks
	// before): in Berlin's rules the window lasts 11 hours, in New York's 12.
	start := time.Date(2026, 3, 28, 19, 0, 0, 0, time.UTC)
	if os.Getenv(zoneChildEnv) != "" {
		_, zoneErr := loadZone("spec.sleep.timezone", "Europe/Kobeland")
		os.Stdout.WriteString("END " + w.WindowEnd(start).UTC().Format(time.RFC3339) + "\n")
		os.Stdout.WriteString("KOBELAND " + map[bool]string{true: "known", false: "unknown"}[zoneErr == nil] + "\n")
		return
	}

	want := w.WindowEnd(start)
	require.Equal(t, 11*time.Hour, want.Sub(start), "this process reads Berlin's rules")

	// A host's zoneinfo that says otherwise: Berlin with New York's rules, and a zone of its own.
	embedded, err := zip.OpenReader("zoneinfo.zip")
	require.NoError(t, err)
	defer embedded.Close()
	var newYork []byte
	for _, f := range embedded.File {
		if f.Name == "America/New_York" {
			rc, err := f.Open()
			require.NoError(t, err)
			newYork, err = io.ReadAll(rc)
			require.NoError(t, err)
			rc.Close()
		}
	}
	require.NotEmpty(t, newYork)
	var fake bytes.Buffer
	zw := zip.NewWriter(&fake)
	for _, name := range []string{"Europe/Berlin", "Europe/Kobeland"} {
		// Stored, not deflated: Go's zoneinfo reader reads only uncompressed entries.
		f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		require.NoError(t, err)
		_, err = f.Write(newYork)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	fakePath := filepath.Join(t.TempDir(), "zoneinfo.zip")
	require.NoError(t, os.WriteFile(fakePath, fake.Bytes(), 0o644))
	// The fake file is one Go itself reads: time.LoadLocation gives New York's rules from it.
	hostBerlin, err := time.LoadLocationFromTZData("Europe/Berlin", newYork)
	require.NoError(t, err)
	_, offset := start.In(hostBerlin).Zone()
	require.Equal(t, -4*3600, offset, "the fake Berlin is New York (summer time already)")

	cmd := exec.Command(os.Args[0], "-test.run=^TestWindowEndIgnoresTheHostsZoneRules$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ZONEINFO="+fakePath, zoneChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var gotEnd, kobeland string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "END "); ok {
			gotEnd = v
		}
		if v, ok := strings.CutPrefix(line, "KOBELAND "); ok {
			kobeland = v
		}
	}
	require.NotEmpty(t, gotEnd, "the child's output: %s", out)
	assert.Equal(t, want.UTC().Format(time.RFC3339), gotEnd, "the window ends where kobe's own rules say, not the host's")
	assert.Equal(t, "unknown", kobeland, "a zone only the host's zoneinfo has is not accepted")
}
