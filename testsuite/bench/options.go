package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options are the knobs of one run. Every field has a flag (see NewFlagSet); the JSON names
// are part of the report, so that a result says how it was obtained.
type Options struct {
	// Kobe is the kobe binary to run (`kobe dev`).
	Kobe string `json:"kobe"`
	// Out is the JSON report's path.
	Out string `json:"out"`
	// ToolsDir holds the Kubernetes binaries (`make tools`).
	ToolsDir string `json:"toolsDir"`
	// KubernetesVersion of the pool and of the cold starts; empty = the newest built.
	KubernetesVersion string `json:"kubernetesVersion"`
	// Clients are the concurrency levels of the bind measurement, e.g. [1 10 50].
	Clients []int `json:"clients"`
	// Rounds per level; 0 = enough for MinSamples binds at each level.
	Rounds int `json:"rounds"`
	// Lifecycles is the number of full lease lifecycles, LifecycleClients the clients doing them.
	Lifecycles       int `json:"lifecycles"`
	LifecycleClients int `json:"lifecycleClients"`
	// Cold is the number of cold starts of each kind (local instance, etcd + kube-apiserver).
	Cold int `json:"cold"`
	// Floor is the number of samples of each engine-floor measurement.
	Floor int `json:"floor"`
	// MaxProvisions is the pools' maxConcurrentProvisions.
	MaxProvisions int `json:"maxProvisions"`
	// ThawedSpares is the bind pool's spec.scaling.thawedSpares; -1 (the default) = the level's
	// clients, so that every bind of a burst takes a running member (the warm path), and the
	// spares frozen beyond are none. 0 or more measures binds that thaw a frozen member.
	ThawedSpares int `json:"thawedSpares"`
	// FirstRequestAtOnce: each client of a bind round makes its first request with the
	// kubeconfig as soon as it is Bound, while the rest of the round still binds. By default it
	// waits until every client of the round is bound, so that the bind latency is measured
	// with binds competing only with binds (see bindRound).
	FirstRequestAtOnce bool `json:"firstRequestAtOnce"`
	// BootCPUShares is the local backend's CPU weight for instances until they are Ready
	// ($KOBE_LOCAL_BOOT_CPU_SHARES, for kobe dev and the backend in the bench's process alike):
	// -1 (the default) = the environment's value, else kobe's default; 0 = off. The report has
	// the value used.
	BootCPUShares int `json:"bootCpuShares"`
	// Timeout bounds the whole run (not in the report: it changes no figure).
	Timeout time.Duration `json:"-"`
}

// MinSamples is the number of binds each concurrency level gets at least when -rounds is 0:
// a hundred rounds of the 1-client level, ten of 10 clients, two of 50 — enough for a p99.
const MinSamples = 100

// MaxClients bounds -clients: each client needs a warm local cluster (~190 MiB PSS and ~3.5 %
// of a core even idle).
const MaxClients = 200

// DefaultOptions are the defaults of the flags. The largest level is 50 clients (issue 15: a
// warm bind no longer costs a round trip to the instance, and spares cost less idle); every
// round of a level waits for its clusters to be replaced, so a full run takes most of an hour
// on 2 cores: -clients and -rounds make a shorter one.
func DefaultOptions() Options {
	return Options{
		Kobe:             "bin/kobe",
		Out:              "bench.json",
		Clients:          []int{1, 10, 50},
		Rounds:           0,
		Lifecycles:       20,
		LifecycleClients: 4,
		Cold:             3,
		Floor:            100,
		MaxProvisions:    4,
		ThawedSpares:     -1,
		BootCPUShares:    -1,
		Timeout:          90 * time.Minute,
	}
}

// NewFlagSet declares the flags on a FlagSet that fills o (whose values are the defaults).
// Flags that need parsing beyond the flag package (-clients) are checked by Validate.
func NewFlagSet(o *Options, clients *string) *flag.FlagSet {
	fs := flag.NewFlagSet("kobe-bench", flag.ContinueOnError)
	fs.StringVar(&o.Kobe, "kobe", o.Kobe, "the kobe binary to benchmark (`make build` writes bin/kobe)")
	fs.StringVar(&o.Out, "out", o.Out, "write the JSON report to this file")
	fs.StringVar(&o.ToolsDir, "tools", o.ToolsDir, "directory of the Kubernetes binaries built by `make tools` (default: $KOBE_TOOLS_DIR, else .cache/tools)")
	fs.StringVar(&o.KubernetesVersion, "k8s-version", o.KubernetesVersion, "Kubernetes version of the pool and the cold starts (default: the newest built)")
	fs.StringVar(clients, "clients", joinInts(o.Clients), "concurrency levels of the bind-latency measurement, comma-separated")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, fmt.Sprintf("rounds per concurrency level (0: enough rounds for %d binds per level)", MinSamples))
	fs.IntVar(&o.Lifecycles, "lifecycles", o.Lifecycles, "number of full lease lifecycles (create → bound → release → torn down)")
	fs.IntVar(&o.LifecycleClients, "lifecycle-clients", o.LifecycleClients, "concurrent clients of the lifecycle measurement (also the warm size of its pool)")
	fs.IntVar(&o.Cold, "cold", o.Cold, "cold starts of each kind: local instance, and etcd + kube-apiserver the envtest way")
	fs.IntVar(&o.Floor, "floor", o.Floor, "samples of each engine-floor measurement (Update; UpdateWithStart)")
	fs.IntVar(&o.MaxProvisions, "max-provisions", o.MaxProvisions, "the pools' maxConcurrentProvisions")
	fs.IntVar(&o.ThawedSpares, "thawed-spares", o.ThawedSpares, "the bind pool's spec.scaling.thawedSpares (-1: the level's clients, nothing frozen)")
	fs.BoolVar(&o.FirstRequestAtOnce, "first-request-at-once", o.FirstRequestAtOnce, "each client makes its first request with the kubeconfig as soon as it is Bound, beside the round's other binds (default: once the whole round is bound)")
	fs.IntVar(&o.BootCPUShares, "boot-cpu-shares", o.BootCPUShares, "the local backend's CPU weight (cgroup cpu.shares) of instances until Ready: 0 = off, 2-262144, -1 = $KOBE_LOCAL_BOOT_CPU_SHARES or kobe's default")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "give up (and clean up) after this long")
	return fs
}

// ParseFlags parses args into Options and validates them. Usage and errors go to errOut.
func ParseFlags(args []string, errOut io.Writer) (Options, error) {
	o := DefaultOptions()
	var clients string
	fs := NewFlagSet(&o, &clients)
	fs.SetOutput(errOut)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (every setting is a flag; see -h)", fs.Arg(0))
	}
	var err error
	if o.Clients, err = ParseClients(clients); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// ParseClients parses the -clients list: distinct positive integers, e.g. "1,10,50".
func ParseClients(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("-clients: empty; want a comma-separated list such as 1,10,50")
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("-clients: %q is not a number (want a list such as 1,10,50)", f)
		}
		if n < 1 || n > MaxClients {
			return nil, fmt.Errorf("-clients: %d is out of range 1..%d", n, MaxClients)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("-clients: %d is listed twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// Validate checks the options and says which flag is wrong.
func (o Options) Validate() error {
	if len(o.Clients) == 0 {
		return errors.New("-clients: at least one concurrency level is needed")
	}
	checks := []struct {
		flag string
		v    int
		min  int
	}{
		{"-rounds", o.Rounds, 0},
		{"-lifecycles", o.Lifecycles, 1},
		{"-lifecycle-clients", o.LifecycleClients, 1},
		{"-cold", o.Cold, 1},
		{"-floor", o.Floor, 1},
		{"-max-provisions", o.MaxProvisions, 1},
	}
	for _, c := range checks {
		if c.v < c.min {
			return fmt.Errorf("%s: %d must be at least %d", c.flag, c.v, c.min)
		}
	}
	if b := o.BootCPUShares; b < -1 || b == 1 || b > 262144 {
		return fmt.Errorf("-boot-cpu-shares: %d is not -1 (the environment's or kobe's default), 0 (off) or 2-262144", b)
	}
	if o.LifecycleClients > o.Lifecycles {
		return fmt.Errorf("-lifecycle-clients: %d clients for %d lifecycles would leave clients idle; use at most %d", o.LifecycleClients, o.Lifecycles, o.Lifecycles)
	}
	if o.LifecycleClients > MaxClients {
		return fmt.Errorf("-lifecycle-clients: %d is above %d", o.LifecycleClients, MaxClients)
	}
	if o.Timeout < time.Minute {
		return fmt.Errorf("-timeout: %s is too short for a run (at least 1m)", o.Timeout)
	}
	if strings.TrimSpace(o.Out) == "" {
		return errors.New("-out: a file name is required")
	}
	if o.Kobe == "" {
		return errors.New("-kobe: the kobe binary is required (`make build` writes bin/kobe)")
	}
	if st, err := os.Stat(o.Kobe); err != nil {
		return fmt.Errorf("-kobe: %v (run `make build`)", err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("-kobe: %s is not an executable file", o.Kobe)
	}
	return nil
}

// RoundsFor is the number of rounds run at a concurrency level: -rounds when set, else enough
// rounds for MinSamples binds.
func (o Options) RoundsFor(clients int) int {
	if o.Rounds > 0 {
		return o.Rounds
	}
	return (MinSamples + clients - 1) / clients
}

// MaxClientsLevel is the largest bind concurrency level: the warm size of the bind pool.
func (o Options) MaxClientsLevel() int { return slices.Max(o.Clients) }

func joinInts(ns []int) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

// ThawedFor is the bind pool's thawedSpares at a level of clients.
func (o Options) ThawedFor(clients int) int {
	if o.ThawedSpares < 0 {
		return clients
	}
	return o.ThawedSpares
}
