// Command kobe-bench is `make bench`: it runs the real `kobe dev` with the local backend and
// measures the lease path, cold starts, the engine floor and memory in one run, prints a table
// and writes the figures as JSON. See docs/performance.md.
//
//	go run ./testsuite/bench/cmd/kobe-bench -kobe bin/kobe -out bench.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	o, err := bench.ParseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kobe-bench: %v\n", err)
		return 2
	}
	if o.ToolsDir == "" {
		o.ToolsDir = local.DefaultToolsDir()
	}
	if o.KubernetesVersion, err = bench.ResolveTools(o.ToolsDir, o.KubernetesVersion); err != nil {
		fmt.Fprintf(os.Stderr, "kobe-bench: %v\n", err)
		return 2
	}

	// Ctrl-C or SIGTERM cancels the run; Run then stops kobe and every cluster it started.
	// A second Ctrl-C kills the bench at once (the default behaviour is restored).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()

	rep, err := bench.Run(ctx, o, os.Stderr)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "kobe-bench: interrupted; everything it started was stopped, no figures reported")
		return 130
	}
	if err != nil {
		if rep == nil || len(rep.Bind) == 0 {
			fmt.Fprintf(os.Stderr, "kobe-bench: FAILED, no figures reported: %v\n", err)
			return 1
		}
		// What was measured before the failure is kept: a late step's failure does not cost
		// the levels measured before it.
		rep.Incomplete = err.Error()
		fmt.Fprintf(os.Stderr, "kobe-bench: FAILED: %v\n\n", err)
		rep.RenderIncomplete(os.Stdout)
		if werr := rep.WriteJSON(o.Out); werr != nil {
			fmt.Fprintf(os.Stderr, "kobe-bench: writing %s: %v\n", o.Out, werr)
		} else {
			fmt.Printf("\nJSON (incomplete): %s\n", o.Out)
		}
		return 1
	}
	fmt.Println()
	if err := rep.Render(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kobe-bench: %v\n", err)
		return 1
	}
	if err := rep.WriteJSON(o.Out); err != nil {
		fmt.Fprintf(os.Stderr, "kobe-bench: writing %s: %v\n", o.Out, err)
		return 1
	}
	fmt.Printf("\nJSON: %s\n", o.Out)
	return 0
}
