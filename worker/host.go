package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var unsafeChars = regexp.MustCompile(`[^a-z0-9-]+`)

// HostID returns the stable identity of this kobe host, kept in <stateDir>/host-id. It survives
// restarts, so that a restarted worker serves the instances its predecessor created here.
func HostID(stateDir string) (string, error) {
	path := filepath.Join(stateDir, "host-id")
	if data, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(data)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	host, _ := os.Hostname()
	host = strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(host), "-"), "-")
	if host == "" {
		host = "host"
	}
	if len(host) > 40 {
		host = host[:40]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := host + "-" + hex.EncodeToString(b[:])
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return id, nil
}
