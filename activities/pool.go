package activities

import (
	"context"
	"errors"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// ForgetPool removes a drained pool from the store and records it, in one transaction
// (idempotent: a retry after a success finds no row and writes no second event).
func (a *Activities) ForgetPool(ctx context.Context, name string) error {
	return a.Store.InTx(ctx, func(tx store.Store) error {
		err := tx.DeletePool(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = tx.AppendEvent(ctx, store.Event{Actor: "kobe", Action: "pool.deleted", Target: name, Pool: name, Result: "ok"})
		return err
	})
}
