package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// loadPolicy reads --policy, or returns the built-in default policy.
func loadPolicy(file string) (*access.Policy, error) {
	if file == "" {
		return access.DefaultPolicy(), nil
	}
	return access.LoadPolicy(file)
}

// ensureAdminToken makes sure path holds an admin token the store knows: a missing file gets a
// new token (written 0600, created exclusively so two processes cannot both write one); a
// token in the file that the store lacks (a fresh store) is registered again.
func ensureAdminToken(ctx context.Context, st store.Store, pol *access.Policy, path string) error {
	if _, ok := pol.Role(access.RoleAdmin); !ok {
		return fmt.Errorf("--admin-token-file: the policy has no %q role", access.RoleAdmin)
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		secret := strings.TrimSpace(string(data))
		if !strings.HasPrefix(secret, access.TokenPrefix) {
			return fmt.Errorf("--admin-token-file %s: does not hold a kobe token", path)
		}
		if _, err := st.GetTokenByHash(ctx, access.HashToken(secret)); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		id, _, err := access.NewToken()
		if err != nil {
			return err
		}
		_, err = st.CreateToken(ctx, store.Token{ID: id, Name: "admin", Role: access.RoleAdmin, Principal: "admin", Hash: access.HashToken(secret)})
		return err
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	id, secret, err := access.NewToken()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	if _, err := st.CreateToken(ctx, store.Token{ID: id, Name: "admin", Role: access.RoleAdmin, Principal: "admin", Hash: access.HashToken(secret)}); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	return f.Close()
}
