// Stand-in for github.com/loft-sh/e2e-framework, which the Go module proxy here does not
// serve (403). Only vcluster's e2e-next tests import it; the syncer (cmd/vcluster) does not,
// but `go mod tidy` still needs the module to resolve vcluster's module graph.
module github.com/loft-sh/e2e-framework

go 1.25.0
