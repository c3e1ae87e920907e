package pool

import (
	"context"
	"errors"

	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// Activities are the pool domain's activities: the pool's store row and its Temporal Schedules.
type Activities struct {
	Store store.Store
	// Temporal makes the pool's schedules (SyncPoolSchedules).
	Temporal client.Client
}

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

// ForgetPoolInput names a drained pool and the store generation its delete saw.
type ForgetPoolInput struct {
	Name string `json:"name"`
	// Generation of the pool's row when it was deleted; 0 (a delete from an older kobe) forgets
	// whatever row there is.
	Generation int64 `json:"generation"`
}

// ForgetUnchangedPool removes a drained pool from the store, and records it, unless the pool
// was applied again after its delete (the row's generation is newer): then it keeps the row
// and answers false, and the pool's workflow lives on. Idempotent like ForgetPool.
func (a *Activities) ForgetUnchangedPool(ctx context.Context, in ForgetPoolInput) (bool, error) {
	if in.Generation <= 0 {
		return true, a.ForgetPool(ctx, in.Name)
	}
	forgotten := false
	err := a.Store.InTx(ctx, func(tx store.Store) error {
		deleted, err := tx.DeletePoolGeneration(ctx, in.Name, in.Generation)
		if err != nil {
			return err
		}
		if !deleted {
			// No row (a retry after a success) or a newer one (applied again).
			_, err := tx.GetPool(ctx, in.Name)
			if errors.Is(err, store.ErrNotFound) {
				forgotten = true
				return nil
			}
			return err
		}
		forgotten = true
		_, err = tx.AppendEvent(ctx, store.Event{Actor: "kobe", Action: "pool.deleted", Target: in.Name, Pool: in.Name, Result: "ok"})
		return err
	})
	return forgotten, err
}
