package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// ReleaseFile is the file of a dev state dir that names the release of kobe that last started
// on it (beside the store's kobe_release row): a state dir with a Temporal database and no such
// file was made by a kobe before v0.1.0.
const ReleaseFile = "release"

// ServerDrain is how to drain a server's store before starting a release that does not run its
// state (docs/architecture.md, "Releases and workflow versions").
const ServerDrain = "with the kobe that ran it, release every lease (`kobe lease release`) and delete every pool " +
	"(`kobe pool delete`) until `kobe pool list` and `kobe instance list` are empty; see docs/architecture.md, " +
	"\"Upgrading across the supported window\""

// checkRelease refuses a store, and in dev its state dir, last run by a release before
// buildinfo.OldestSupported (or before v0.1.0, which introduced the stamp) while it holds
// anything live: its workflows may have taken paths this release's code no longer has, and
// would fail on replay. A new store, or an old one drained of everything, is accepted and
// stamped with this release.
func checkRelease(ctx context.Context, cfg config.Config, mode config.Mode, st store.Store, dsn string) error {
	dev := mode == config.ModeDev && !cfg.Ephemeral
	err := store.CheckRelease(ctx, st, buildinfo.Get().Version, buildinfo.OldestSupported, time.Now())
	var old *store.OldReleaseError
	if errors.As(err, &old) {
		if dev {
			old.Subject = "the state dir " + cfg.StateDir
			old.Drain = "`kobe dev --down --state-dir " + cfg.StateDir + "`"
		} else {
			old.Subject = "the store " + store.RedactDSN(dsn)
			old.Drain = ServerDrain
		}
		return old
	}
	if err != nil {
		return err
	}
	if dev {
		return stampStateDir(cfg.StateDir, buildinfo.Get().Version)
	}
	return nil
}

// StateDirRelease is the release that last started on a dev state dir ("" with none: a new
// state dir, or one made before v0.1.0).
func StateDirRelease(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, ReleaseFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func stampStateDir(dir, release string) error {
	if err := os.WriteFile(filepath.Join(dir, ReleaseFile), []byte(release+"\n"), 0o600); err != nil {
		return fmt.Errorf("--state-dir: recording its release: %v", err)
	}
	return nil
}
