package activities

import (
	"context"
	"errors"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// ForgetPool removes a drained pool from the store (idempotent).
func (a *Activities) ForgetPool(ctx context.Context, name string) error {
	if err := a.Store.DeletePool(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, err := a.Store.AppendEvent(ctx, store.Event{Actor: "kobe", Action: "pool.deleted", Target: name, Pool: name, Result: "ok"})
	return err
}
