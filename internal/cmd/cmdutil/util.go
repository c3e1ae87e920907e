package cmdutil

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
)

// HumanDuration is a short duration for people, as kubectl's AGE column writes it (12s, 42m,
// 65m, 5h10m, 3d), so that kobe's tables read like kubectl's.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	return duration.HumanDuration(d)
}

// FormatTime shows a time relative to now for a terminal ("in 42m", "3m ago") and as RFC 3339
// otherwise; a nil or zero time is "-".
func FormatTime(t *time.Time, tty bool, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	if !tty {
		return t.UTC().Format(time.RFC3339)
	}
	if t.After(now) {
		return "in " + HumanDuration(t.Sub(now))
	}
	return HumanDuration(now.Sub(*t)) + " ago"
}

// ParseMetadata turns repeated k=v flags into a map.
func ParseMetadata(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--metadata %q: want key=value", kv)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--metadata %q: key %q given twice", kv, k)
		}
		m[k] = v
	}
	return m, nil
}

// SortedKeys returns a map's keys in order.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckPositive rejects a duration flag that is negative, or zero when required.
func CheckPositive(flag string, d time.Duration, required bool) error {
	if d < 0 || (required && d == 0) {
		return fmt.Errorf("%s %s: must be a positive duration such as 30m or 2h", flag, d)
	}
	return nil
}

// WritePrivateFile writes data to path with mode 0600, atomically (kubeconfigs, secrets).
func WritePrivateFile(path string, data []byte) error {
	if path == "" {
		return errors.New("no file name")
	}
	// A file already there is replaced (renamed over), not rewritten: its old mode does not carry over.
	return cliconfig.WriteFileAtomic(path, data)
}

// ExactArgs is cobra.ExactArgs with a message that says what is missing.
func ExactArgs(n int, what string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s: %s (got %d argument%s)", cmd.CommandPath(), what, len(args), plural(len(args)))
		}
		return nil
	}
}

// MinimumArgs is cobra.MinimumNArgs with a message that says what is missing.
func MinimumArgs(n int, what string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("%s: %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
