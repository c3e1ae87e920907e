package service

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// checkSealingKey proves, at start, that this process seals with the key the store's values
// are sealed with: the store records the active key's fingerprint (kobe_sealing_key). A first
// process records its own; a process whose key file holds the recorded key as an older one
// (a key added by `kobe secrets init --add-key`) moves the record to its active key; any other
// is refused, naming both keys, before it seals or opens anything.
func checkSealingKey(ctx context.Context, st store.Store, box *secretbox.Box, keyFile string, logger *zap.Logger) error {
	mine := box.Fingerprint()
	for attempt := 0; attempt < 3; attempt++ {
		recorded, err := st.SealingKey(ctx)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("reading the store's sealing key: %w", err)
		}
		switch {
		case recorded == mine:
			return nil
		case recorded != "" && !slices.Contains(box.Fingerprints(), recorded):
			return fmt.Errorf("%s: its active key is %s, but the store's values are sealed with key %s, which it does not hold: "+
				"give this process the key file the server and the workers share (to move to a new key, add it to that file with "+
				"`kobe secrets init --add-key`, then run `kobe secrets rotate`)", keyFile, mine, recorded)
		}
		// Nothing recorded yet, or an older key of this ring: record this process's.
		ok, err := st.RecordSealingKey(ctx, recorded, mine)
		if err != nil {
			return fmt.Errorf("recording the store's sealing key: %w", err)
		}
		if ok {
			if recorded != "" {
				logger.Warn("the store's sealing key is now this process's newer key: values sealed with the older one "+
					"still open while the key file holds it; `kobe secrets rotate` re-seals them",
					zap.String("key", mine), zap.String("was", recorded))
			}
			return nil
		}
		// Another process changed the record meanwhile: look again.
	}
	return errors.New("the store's sealing key keeps changing: are processes with different key files starting together?")
}
