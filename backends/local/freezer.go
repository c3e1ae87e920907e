package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
)

// FreezerRoot is where the cgroup v1 freezer hierarchy is mounted. An instance's processes go
// into their own cgroup below it (kobe/<instance id>-<hash of the instance directory>), so that
// Freeze can stop all of them at once, in place, and Thaw resume them. Without a writable
// freezer (no v1 freezer mounted, or not allowed to create cgroups) instances run as before and
// Freeze says why it cannot.
var FreezerRoot = "/sys/fs/cgroup/freezer"

// freezerDir is the instance's freezer cgroup.
func (in *instance) freezerDir() string { return freezerDirOf(in.dir) }

// freezerDirOf is the freezer cgroup of the instance in dir (<state>/local/instances/<id>): the
// hash of the directory keeps two kobe state dirs on one machine (tests, several `kobe dev`)
// apart when they hold the same id.
func freezerDirOf(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(FreezerRoot, "kobe", filepath.Base(dir)+"-"+hex.EncodeToString(sum[:4]))
}

// joinFreezerLocked puts pid into the instance's freezer cgroup, creating it if needed. It is
// best effort: an instance whose processes cannot join runs unfrozen, and in.freezerErr says why
// (Freeze reports it).
func (in *instance) joinFreezerLocked(pid int) {
	dir := in.freezerDir()
	if _, err := os.Stat(filepath.Join(FreezerRoot, "cgroup.procs")); err != nil {
		in.freezerErr = fmt.Sprintf("no cgroup v1 freezer is mounted at %s", FreezerRoot)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		in.freezerErr = fmt.Sprintf("creating the freezer cgroup: %v", err)
		return
	}
	err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	if errors.Is(err, os.ErrNotExist) {
		// Another kobe's removeEmptyFreezers took the new, still empty cgroup: once more.
		if err = os.MkdirAll(dir, 0o755); err == nil {
			err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		}
	}
	if err != nil {
		in.freezerErr = fmt.Sprintf("moving pid %d into %s: %v", pid, dir, err)
		return
	}
	in.freezerErr = ""
}

// removeEmptyFreezers removes the freezer cgroups under <FreezerRoot>/kobe that hold no process:
// those of instances whose processes were killed and directories removed without Delete (a
// killed kobe whose state dir was then deleted, a test harness's sweep). A cgroup with a process
// refuses rmdir (EBUSY), so a live instance's, of this kobe or another, is never touched.
func removeEmptyFreezers() {
	parent := filepath.Join(FreezerRoot, "kobe")
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(procs))) == 0 {
			_ = os.Remove(dir)
		}
	}
}

// freezerState reads the cgroup's state: THAWED, FREEZING or FROZEN ("" if there is no cgroup).
func freezerState(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// setFreezerState writes want (FROZEN or THAWED) and waits until the kernel reports it: freezing
// completes once every task of the cgroup has stopped, which takes a moment for a busy task.
func setFreezerState(ctx context.Context, dir, want string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(want), 0o644); err != nil {
			return fmt.Errorf("writing %s to %s: %w", want, dir, err)
		}
		got := freezerState(dir)
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("freezer cgroup %s is %s after 10 s, want %s", dir, got, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// thawForStop thaws the processes of the instance in dir so that they can receive the signals
// that stop them (a frozen task acts on no signal, SIGKILL included, until thawed).
func thawForStop(dir string) error {
	cg := freezerDirOf(dir)
	if s := freezerState(cg); s == "" || s == "THAWED" {
		return nil
	}
	return setFreezerState(context.Background(), cg, "THAWED")
}

// removeFreezer removes the (empty) freezer cgroup of the instance in dir. A killed process
// leaves its cgroup only once it has exited and been reaped, which on a loaded host can take a
// moment after the kill returned (seen under -race in CI): removeCgroup waits for that.
func removeFreezer(instanceDir string) error {
	return removeCgroup(freezerDirOf(instanceDir))
}

// Freeze implements backends.Freezer: every process of a Ready instance stops where it stands
// (cgroup freezer). It keeps its memory, ports and connections and uses no CPU; it does not
// answer until Thaw. Freezing a frozen instance succeeds.
func (b *Backend) Freeze(ctx context.Context, id string) error {
	unlock := b.locks.Lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	if st := in.status(); st.Phase != backends.PhaseReady && st.Phase != backends.PhaseFrozen {
		return fmt.Errorf("instance %s is %s: only a Ready instance can be frozen", id, st.Phase)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	// Every process joins again (idempotent): one adopted after a restart may not be in it yet.
	for _, p := range in.procs {
		in.joinFreezerLocked(p.pid)
		if in.freezerErr != "" {
			return fmt.Errorf("instance %s cannot be frozen: %s: %w", id, in.freezerErr, backends.ErrUnavailableHere)
		}
	}
	if err := setFreezerState(ctx, in.freezerDir(), "FROZEN"); err != nil {
		// Half-frozen helps nobody: back to running.
		_ = setFreezerState(context.WithoutCancel(ctx), in.freezerDir(), "THAWED")
		return err
	}
	in.rec.Frozen = true
	return in.save()
}

// Thaw implements backends.Freezer: the processes of a frozen instance run again from where they
// stopped, and Thaw returns once its API server answers (nothing restarts, so within
// milliseconds). A member is granted on a successful thaw, so one whose process died while
// frozen, or whose API does not answer within thawAnswerWithin, is an error, not a success.
// Thawing an instance that is not frozen succeeds if it serves.
func (b *Backend) Thaw(ctx context.Context, id string) error {
	unlock := b.locks.Lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	if err := in.thawLocked(ctx); err != nil {
		return err
	}
	return in.answers(ctx, thawAnswerWithin)
}

// thawAnswerWithin bounds the wait for a thawed API server's first answer: it resumes in
// milliseconds, so this only allows for a loaded host.
const thawAnswerWithin = 10 * time.Second

func (in *instance) thawLocked(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if s := freezerState(in.freezerDir()); s != "" && s != "THAWED" {
		if err := setFreezerState(ctx, in.freezerDir(), "THAWED"); err != nil {
			return err
		}
	}
	if !in.rec.Frozen {
		return nil
	}
	in.rec.Frozen = false
	return in.save()
}

// answers waits until the instance's processes run and its API server answers /readyz, for at
// most within; otherwise it says what is wrong.
func (in *instance) answers(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		in.mu.Lock()
		dead := in.deadProcessLocked()
		in.mu.Unlock()
		if dead != "" {
			return fmt.Errorf("instance %s does not run: %s", in.rec.ID, dead)
		}
		err := in.readyz(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %s: its API server does not answer: %w", in.rec.ID, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
