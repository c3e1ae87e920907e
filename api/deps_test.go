package api

import (
	"os/exec"
	"strings"
	"testing"
)

// The wire types and the Go client are what a CLI or a user's program links: they must pull in
// nothing but the standard library (no pgx, SQLite, Temporal SDK or client-go), which is why
// the server lives in package server.
func TestAPILinksOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var others []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/kunobi-ninja/kobe/api" {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		t.Fatalf("package api links %d packages beyond the standard library: %v", len(others), others)
	}
}
