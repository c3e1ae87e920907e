// Package buildinfo carries the version stamped into the kobe binary at link time.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version and Commit are set with -ldflags "-X github.com/kunobi-ninja/kobe/internal/buildinfo.Version=…".
// A plain `go build` leaves them at their defaults; Commit then falls back to the VCS stamp Go records.
var (
	Version = "v0.1.0-dev"
	Commit  = ""
)

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
