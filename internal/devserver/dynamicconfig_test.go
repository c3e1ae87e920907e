package devserver

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDynamicConfigIsDocumented: the paragraph "Dynamic config …" of docs/architecture.md names,
// by key, exactly the settings the embedded Temporal server is given (dynamicConfig): an
// operator running kobe against another Temporal reads there what kobe dev sets.
func TestDynamicConfigIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	require.NoError(t, err)
	_, after, found := strings.Cut(string(doc), "\nDynamic config")
	require.True(t, found, `docs/architecture.md has a paragraph "Dynamic config …"`)
	paragraph, _, _ := strings.Cut(after, "\n\n")
	var documented []string
	for _, m := range regexp.MustCompile("`([a-z]+\\.[A-Za-z.]+)`").FindAllStringSubmatch(paragraph, -1) {
		// Temporal's keys are case-insensitive (Key lowercases them); the docs write them as
		// Temporal's documentation does.
		documented = append(documented, strings.ToLower(m[1]))
	}
	var set []string
	for k := range dynamicConfig() {
		set = append(set, k.String())
	}
	sort.Strings(documented)
	sort.Strings(set)
	assert.Equal(t, set, documented, "the keys kobe dev sets (left) and those docs/architecture.md's \"Dynamic config\" paragraph names (right)")
}
