package testsuite_test

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/kunobi-ninja/kobe/"

// layer ranks kobe's packages from the ground up (docs/architecture.md, "Packages"). A package
// imports only packages of a lower rank, or of its own rank within the same family (the CLI's
// commands, a backend and the backend contract, the ground-floor libraries). The test harness
// (testsuite/...) may import anything and nothing of the product imports it.
func layer(pkg string) (rank float64, family string) {
	switch {
	case pkg == "cmd/kobe" || strings.HasPrefix(pkg, "internal/cmd/"):
		return 9, "cli"
	case pkg == "internal/service":
		return 8, "app"
	case pkg == "poolresource":
		// The ClusterPool controller: it changes pools through the server's ApplyPool and
		// DeletePool, the path of PUT and DELETE /v1/pools/{name}.
		return 7.5, "poolresource"
	case pkg == "server":
		return 7, "server"
	case pkg == "worker":
		return 7, "worker"
	case pkg == "api":
		return -1, "api"
	case pkg == "lease":
		return 6, "lease"
	case pkg == "pool":
		return 5, "pool"
	case pkg == "lease/leasestart":
		// How a lease's workflow is started: both pool, which starts a lease on a warm bind,
		// and lease import it.
		return 4.5, "leasestart"
	case pkg == "instance":
		return 4, "instance"
	case pkg == "doctor":
		return 4, "doctor"
	case pkg == "internal/addons" || pkg == "internal/readiness":
		return 3, pkg
	case strings.HasPrefix(pkg, "resources/"):
		// kobe's Kubernetes resources: their types convert to and from poolspec's manifest.
		return 2.5, "resources"
	case pkg == "poolspec":
		return 2, "poolspec"
	case pkg == "backends" || strings.HasPrefix(pkg, "backends/"):
		return 1, "backends"
	case pkg == "internal/identity":
		return 0.5, "identity"
	}
	return 0, "library"
}

// The import graph is a DAG in the order cli → app → server and worker → lease → pool →
// leasestart → instance and doctor → readiness and addons → resources → poolspec → backends →
// identity → the libraries → api; no package imports one above it, and api (kobe's vocabulary,
// the wire types and the client) imports no other kobe package.
func TestImportGraphIsLayered(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var wrong []string
	packages := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from, ok := strings.CutPrefix(fields[0], module)
		if !ok || strings.HasPrefix(from, "testsuite") || strings.HasPrefix(from, "hack/") {
			continue
		}
		packages++
		fromRank, fromFamily := layer(from)
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			toRank, toFamily := layer(to)
			switch {
			case strings.HasPrefix(to, "testsuite"):
				wrong = append(wrong, from+" imports the test harness "+to)
			case from == "api":
				wrong = append(wrong, "api imports "+to+" (api is the wire types and the client only)")
			case toRank > fromRank, toRank == fromRank && toFamily != fromFamily:
				wrong = append(wrong, from+" imports "+to+", which is not below it")
			}
		}
	}
	sort.Strings(wrong)
	if packages < 30 {
		t.Fatalf("go list found only %d kobe packages", packages)
	}
	for _, w := range wrong {
		t.Error(w)
	}
}
