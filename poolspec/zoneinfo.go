package poolspec

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sync"
	"time"
)

// The zone rules kobe reads schedules with come from zoneinfo.zip, embedded in the binary:
// never from the host (its /usr/share/zoneinfo, the ZONEINFO variable). The end of a warm
// window (WindowEnd) feeds the pool's decisions, which replay on any worker: two workers with
// different system tzdata would otherwise compute different ends for the same window.
//
// zoneinfo.zip is Go's $GOROOT/lib/time/zoneinfo.zip, IANA tzdata TZDataVersion. To update it,
// copy the zip of a newer Go (or build one with its lib/time/update.bash), set TZDataVersion,
// and say so in docs/pools.md: a new rule changes the windows of the zones it touches, for
// the runs started after the workers run the new binary.
//
//go:embed zoneinfo.zip
var zoneinfoZip []byte

// TZDataVersion is the IANA tzdata release of the embedded zoneinfo.zip.
const TZDataVersion = "2025c"

var zones struct {
	once  sync.Once
	files map[string]*zip.File
	err   error

	mu     sync.Mutex
	loaded map[string]*time.Location
}

// LoadZone is time.LoadLocation on the zone rules embedded in kobe ("" and "UTC" are UTC).
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	zones.once.Do(func() {
		r, err := zip.NewReader(bytes.NewReader(zoneinfoZip), int64(len(zoneinfoZip)))
		if err != nil {
			zones.err = fmt.Errorf("the embedded zoneinfo.zip: %v", err)
			return
		}
		zones.files = make(map[string]*zip.File, len(r.File))
		for _, f := range r.File {
			zones.files[f.Name] = f
		}
		zones.loaded = map[string]*time.Location{}
	})
	if zones.err != nil {
		return nil, zones.err
	}
	zones.mu.Lock()
	defer zones.mu.Unlock()
	if loc, ok := zones.loaded[name]; ok {
		return loc, nil
	}
	f, ok := zones.files[name]
	if !ok {
		return nil, fmt.Errorf("unknown time zone %s", name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("time zone %s: %v", name, err)
	}
	zones.loaded[name] = loc
	return loc, nil
}
