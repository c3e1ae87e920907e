// Package buildinfo carries the version stamped into the kobe binary at link time.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version and Commit are set with -ldflags "-X github.com/kunobi-ninja/kobe/internal/buildinfo.Version=…".
// A plain `go build` leaves them at their defaults (Version is the release, Release); Commit then
// falls back to the VCS stamp Go records.
var (
	Version = Release
	Commit  = ""
)

// Release is the release this source is (CHANGELOG.md). Its workflows replay the histories of the
// releases from OldestSupported on (worker/testdata/histories); a store or dev state dir last run
// by an older release is refused at start while it holds anything live (store.CheckRelease).
const Release = "v0.1.0"

// OldestSupported is the oldest release whose running workflows this kobe replays: the start of
// the supported window (docs/architecture.md, "Releases and workflow versions"). v0.1.0 is the
// baseline: it replays no release before it.
const OldestSupported = "v0.1.0"

// Info is what `kobe version` and /v1/status report.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information of the running binary.
func Get() Info {
	commit := Commit
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{
		Version:   Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}
