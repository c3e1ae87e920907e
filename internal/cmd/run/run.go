// Package run implements `kobe run POOL -- CMD ARGS…`: lease a cluster, run a command against
// it, give the cluster back.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdutil"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
)

// Exit codes of kobe run itself (the docker run convention), apart from CMD's own.
const (
	// ExitLeaseFailed: no lease (refused, failed, not Bound in time) or another kobe failure.
	ExitLeaseFailed = 125
	// ExitCannotRun: CMD was found but could not be started.
	ExitCannotRun = 126
	// ExitNotFound: CMD was not found.
	ExitNotFound = 127
)

// Options of `kobe run`.
type Options struct {
	Factory        *factory.Factory
	Pool           string
	Command        []string
	TTL            time.Duration
	Name           string
	MetadataPairs  []string
	Metadata       map[string]string
	Priority       int
	IdempotencyKey string
	IdleTimeout    time.Duration
	WaitTimeout    time.Duration
	Quiet          bool

	// Signals delivers SIGINT/SIGTERM (default: this process's, via signal.Notify).
	Signals <-chan os.Signal
	// Poll and PollInterval tune the wait for Bound (see cmdutil.WaitOptions).
	Poll, PollInterval time.Duration
	// ExtendBefore is how close to expiry the lease is extended (default: a fifth of its TTL,
	// between 10s and 5m); HeartbeatEvery the heartbeat period (default: a third of the idle
	// timeout, at most 1m).
	ExtendBefore, HeartbeatEvery time.Duration
}

// NewCmdRun builds `kobe run`; runF replaces the behaviour in tests.
func NewCmdRun(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Factory: f, Poll: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "run POOL [flags] -- CMD [ARGS...]",
		Short: "Lease a cluster, run a command with KUBECONFIG set, release the cluster",
		Long: `Lease a cluster from POOL, wait until it is Bound, and run CMD with KUBECONFIG pointing at a
private temporary kubeconfig (KOBE_LEASE_ID and KOBE_LEASE_POOL are set too). stdin, stdout
and stderr are CMD's. While CMD runs, kobe keeps the lease alive: it extends it shortly before
it expires, as long as the pool's extension budget and maxTtl allow (a warning says when they
no longer do), and, with --idle-timeout, sends heartbeats (a lease whose kobe run died ends
after that long without one; without --idle-timeout, no heartbeats are sent).

When CMD exits, or on SIGINT/SIGTERM (passed on to CMD, which is waited for), the lease is
released and the kubeconfig removed. kobe run exits with CMD's exit code (128+N if a signal N
ended it), or with 125 when no lease was obtained, 126 when CMD could not be started, 127 when
CMD was not found.`,
		Example: `  kobe run ci -- make e2e
  kobe run ci --ttl 2h --name pr-1234 -- go test ./e2e/...
  kobe run dev -- kubectl get nodes
  kobe run ci --idle-timeout 5m --wait-timeout 20m -- ./hack/e2e.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			pool, command := splitArgs(args, cmd.ArgsLenAtDash())
			switch {
			case len(pool) == 0:
				return fmt.Errorf("%s: give the pool and the command: kobe run POOL -- CMD [ARGS...]", cmd.CommandPath())
			case len(pool) > 1:
				return fmt.Errorf("%s: one pool before --, got %q", cmd.CommandPath(), pool)
			case len(command) == 0:
				return fmt.Errorf("%s: give the command to run after the pool: kobe run %s -- CMD [ARGS...]", cmd.CommandPath(), pool[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, command := splitArgs(args, cmd.ArgsLenAtDash())
			opts.Pool, opts.Command = pool[0], command
			if err := cmdutil.CheckPositive("--ttl", opts.TTL, false); err != nil {
				return err
			}
			if err := cmdutil.CheckPositive("--idle-timeout", opts.IdleTimeout, false); err != nil {
				return err
			}
			if err := cmdutil.CheckPositive("--wait-timeout", opts.WaitTimeout, true); err != nil {
				return err
			}
			md, err := cmdutil.ParseMetadata(opts.MetadataPairs)
			if err != nil {
				return err
			}
			opts.Metadata = md
			if runF != nil {
				return runF(opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 0, "lease TTL, renewed while CMD runs (default: the pool's ttl)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "a name (alias) for the lease")
	cmd.Flags().StringArrayVar(&opts.MetadataPairs, "metadata", nil, "key=value recorded with the lease (repeatable)")
	cmd.Flags().IntVar(&opts.Priority, "priority", 0, "queue priority: higher is served first when the pool is busy")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "idempotency key of the lease request (default: a random one)")
	cmd.Flags().DurationVar(&opts.IdleTimeout, "idle-timeout", 0, "end the lease when kobe run stops heartbeating for this long (e.g. it was killed); 0 = off")
	cmd.Flags().DurationVar(&opts.WaitTimeout, "wait-timeout", 10*time.Minute, "give up when the lease is not Bound after this long")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing of kobe's own but warnings and errors")
	return cmd
}

// splitArgs separates POOL from CMD: around "--" when there is one, else the first argument
// is the pool and the rest the command (`kobe run dev kubectl version` needs no --, but a
// command with flags of its own does).
func splitArgs(args []string, dash int) (pool, command []string) {
	if dash >= 0 {
		return args[:dash], args[dash:]
	}
	if len(args) == 0 {
		return nil, nil
	}
	return args[:1], args[1:]
}

// lockedWriter serialises kobe's own messages with CMD's output copied to the same writer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stream gives CMD a file as it is (so that it sees the terminal) and anything else behind a lock.
func stream(w io.Writer, mu *sync.Mutex) io.Writer {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return lockedWriter{mu, w}
}

func exitCodeOf(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

func runRun(ctx context.Context, opts *Options) error {
	ios := opts.Factory.IOStreams
	var mu sync.Mutex
	stdout, stderr := stream(ios.Out, &mu), stream(ios.ErrOut, &mu)
	say := func(format string, a ...any) {
		if !opts.Quiet {
			fmt.Fprintf(stderr, "kobe: "+format+"\n", a...)
		}
	}
	warn := func(format string, a ...any) { fmt.Fprintf(stderr, "kobe: warning: "+format+"\n", a...) }

	// Find CMD before taking a cluster for nothing.
	path, err := exec.LookPath(opts.Command[0])
	if err != nil {
		code := ExitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return &cmdutil.ExitError{Code: code, Err: err}
	}
	c, err := opts.Factory.APIClient()
	if err != nil {
		return &cmdutil.ExitError{Code: ExitLeaseFailed, Err: err}
	}

	sigs := opts.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}

	// 1. The lease, Bound. A signal meanwhile cancels the wait and releases what was created.
	key := opts.IdempotencyKey
	if key == "" {
		key = "run-" + randomHex(8)
	}
	req := api.LeaseRequest{Pool: opts.Pool, Alias: opts.Name, Metadata: opts.Metadata, Priority: opts.Priority, IdempotencyKey: key}
	if opts.TTL > 0 {
		req.TTL = opts.TTL.String()
	}
	if opts.IdleTimeout > 0 {
		req.IdleTimeout = opts.IdleTimeout.String()
	}
	leaseCtx, cancelLease := context.WithCancel(ctx)
	defer cancelLease()
	var interrupt os.Signal
	watchDone, watchStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchStopped)
		select {
		case s := <-sigs:
			interrupt = s
			cancelLease()
		case <-watchDone:
		}
	}()
	started := time.Now()
	l, _, err := c.CreateLease(leaseCtx, req)
	if err == nil {
		l, err = cmdutil.WaitForLease(leaseCtx, c, l, cmdutil.WaitOptions{
			Timeout: opts.WaitTimeout, Poll: opts.Poll, MinInterval: opts.PollInterval, IO: ios, Started: started})
	}
	close(watchDone)
	<-watchStopped
	if interrupt != nil || err != nil {
		release := func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if l.ID == "" && interrupt != nil {
				// The create may have reached the server before it was cancelled: the same
				// idempotency key finds that lease (or makes one, released at once).
				l, _, _ = c.CreateLease(cctx, req)
			}
			if l.ID != "" && (l.Phase == "" || l.Phase == api.LeasePending || l.Phase == api.LeaseBound) {
				if rerr := c.ReleaseLease(cctx, l.ID); rerr != nil {
					warn("could not release lease %s: %v", l.ID, rerr)
				} else {
					say("released lease %s", l.ID)
				}
			}
		}
		if interrupt != nil {
			release()
			return &cmdutil.ExitError{Code: exitCodeOf(interrupt), Err: fmt.Errorf("interrupted (%v) before the lease was Bound", interrupt)}
		}
		release()
		if l.ID == "" {
			err = fmt.Errorf("lease from pool %s: %w", opts.Pool, err)
		}
		return &cmdutil.ExitError{Code: ExitLeaseFailed, Err: err}
	}

	// 2. The kubeconfig, in a private directory removed at the end.
	dir, err := os.MkdirTemp("", "kobe-run-")
	if err == nil {
		err = os.Chmod(dir, 0o700)
	}
	var kubeconfig string
	if err == nil {
		kubeconfig = filepath.Join(dir, "kubeconfig")
		err = os.WriteFile(kubeconfig, []byte(l.Kubeconfig), 0o600)
	}
	if err == nil && l.Kubeconfig == "" {
		err = fmt.Errorf("lease %s is Bound but the API sent no kubeconfig", l.ID)
	}
	defer func() {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}()
	releaseLease := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if rerr := c.ReleaseLease(cctx, l.ID); rerr != nil {
			warn("could not release lease %s: %v (it ends at its expiry)", l.ID, rerr)
			return
		}
		say("released lease %s", l.ID)
	}
	if err != nil {
		releaseLease()
		return &cmdutil.ExitError{Code: ExitLeaseFailed, Err: err}
	}

	// 3. CMD, with the lease kept alive meanwhile.
	child := exec.Command(path, opts.Command[1:]...)
	child.Args[0] = opts.Command[0]
	child.Env = append(withoutVars(os.Environ(), "KUBECONFIG", "KOBE_LEASE_ID", "KOBE_LEASE_POOL"),
		"KUBECONFIG="+kubeconfig, "KOBE_LEASE_ID="+l.ID, "KOBE_LEASE_POOL="+opts.Pool)
	child.Stdin, child.Stdout, child.Stderr = ios.In, stdout, stderr
	// Output copied through pipes (not files) must not keep Wait waiting on CMD's leftovers.
	child.WaitDelay = 5 * time.Second
	say("lease %s Bound in pool %s (%s), expires %s; running %s", l.ID, opts.Pool, clusterOf(l),
		cmdutil.FormatTime(l.ExpiresAt, true, time.Now()), strings.Join(opts.Command, " "))
	if err := child.Start(); err != nil {
		releaseLease()
		return &cmdutil.ExitError{Code: ExitCannotRun, Err: err}
	}

	keepCtx, stopKeeping := context.WithCancel(context.Background())
	keeperDone := make(chan struct{})
	go func() {
		defer close(keeperDone)
		keepAlive(keepCtx, c, l, opts, warn)
	}()

	waited := make(chan error, 1)
	go func() { waited <- child.Wait() }()
	var waitErr error
wait:
	for {
		select {
		case waitErr = <-waited:
			break wait
		case s := <-sigs:
			if !deliveredByTerminal(s, ios) {
				_ = child.Process.Signal(s)
			}
		}
	}
	stopKeeping()
	<-keeperDone
	releaseLease()

	code := 0
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.Is(waitErr, exec.ErrWaitDelay):
		// CMD exited; something it left behind held its output open past WaitDelay.
		code = child.ProcessState.ExitCode()
	case errors.As(waitErr, &ee):
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	default:
		warn("%s: %v", opts.Command[0], waitErr)
		code = ExitLeaseFailed
	}
	if code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}

// keepAlive extends the lease shortly before it expires, while the pool allows it, and sends
// heartbeats when the lease has an idle timeout (no other lease needs them), until ctx ends.
func keepAlive(ctx context.Context, c *api.Client, l api.Lease, opts *Options, warn func(string, ...any)) {
	ttl, err := time.ParseDuration(l.EffectiveTTL)
	if err != nil || ttl <= 0 {
		ttl = opts.TTL
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	before := opts.ExtendBefore
	if before <= 0 {
		before = min(max(ttl/5, 10*time.Second), 5*time.Minute)
	}
	heartbeating := opts.IdleTimeout > 0
	every := opts.HeartbeatEvery
	if every <= 0 {
		every = min(max(opts.IdleTimeout/3, time.Second), time.Minute)
	}
	// The expiry as the API gives it; without one, estimated from the bind time (or now).
	var expires time.Time
	switch {
	case l.ExpiresAt != nil:
		expires = *l.ExpiresAt
	case l.BoundAt != nil:
		expires = l.BoundAt.Add(ttl)
	default:
		expires = time.Now().Add(ttl)
	}
	extending := true
	nextHeartbeat := time.Now().Add(every)
	var notBefore time.Time // no extension attempt before this (after a failure or a short grant)
	heartbeatFailing := false
	for {
		var wake, extendAt time.Time
		if heartbeating {
			wake = nextHeartbeat
		}
		if extending {
			extendAt = expires.Add(-before)
			if extendAt.Before(notBefore) {
				extendAt = notBefore
			}
			if wake.IsZero() || extendAt.Before(wake) {
				wake = extendAt
			}
		}
		if wake.IsZero() {
			<-ctx.Done() // nothing left to do but wait for the command
			return
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		now := time.Now()
		if extending && !now.Before(extendAt) {
			res, err := c.ExtendLease(ctx, l.ID, ttl)
			if ctx.Err() != nil {
				return
			}
			switch reason := api.Reason(err); {
			case err == nil:
				expires = res.ExpiresAt
				// A grant that leaves the expiry inside the margin must not turn into a busy loop.
				notBefore = now.Add(min(before/2, 30*time.Second))
			case reason == api.ReasonExtensionBudgetExhausted || reason == api.ReasonMaxTTLCeiling:
				extending = false
				warn("lease %s cannot be extended any more (%s): it ends %s, whether or not %s is done",
					l.ID, reason, expires.Local().Format("15:04:05"), opts.Command[0])
			case reason == api.ReasonNotReady || reason == api.ReasonExpired || reason == api.ReasonNotFound:
				extending = false
				warn("lease %s is no longer Bound (%s): its cluster is gone or going", l.ID, reason)
			default:
				warn("could not extend lease %s: %v; retrying", l.ID, err)
				notBefore = now.Add(min(before/3, 15*time.Second))
			}
		}
		if heartbeating && !now.Before(nextHeartbeat) {
			err := c.HeartbeatLease(ctx, l.ID)
			if ctx.Err() != nil {
				return
			}
			switch {
			case err == nil:
				heartbeatFailing = false
			case !heartbeatFailing:
				heartbeatFailing = true
				warn("heartbeat of lease %s failed: %v (the lease ends after --idle-timeout %s without one)", l.ID, err, opts.IdleTimeout)
			}
			nextHeartbeat = now.Add(every)
		}
	}
}

func clusterOf(l api.Lease) string {
	if l.ClusterName != "" {
		return "cluster " + l.ClusterName
	}
	return "cluster " + l.ID
}

func withoutVars(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
