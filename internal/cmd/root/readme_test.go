package root

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

// readmeCommands reads the first column of the README's "## Commands" table: each `kobe CMD
// SUB|SUB…` span gives a command and the subcommands (or, for a command without any, the
// arguments) it lists; words that are not alternatives (POOL, -f) are not counted.
func readmeCommands(t *testing.T) map[string][]string {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n## Commands\n")
	require.True(t, found, "README.md has a section ## Commands")
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string][]string{}
	span := regexp.MustCompile("`kobe ([^`]+)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 3 || !strings.Contains(cells[1], "`kobe ") {
			continue
		}
		for _, m := range span.FindAllStringSubmatch(cells[1], -1) {
			words := strings.Fields(strings.ReplaceAll(m[1], "\x00", "|"))
			name := words[0]
			var listed []string
			if rest := strings.Join(words[1:], " "); strings.Contains(rest, "|") {
				for _, alt := range strings.Split(rest, "|") {
					listed = append(listed, strings.Fields(alt)[0])
				}
			}
			out[name] = append(out[name], listed...)
		}
	}
	require.NotEmpty(t, out, "the README's command table")
	return out
}

// TestREADMECommandTable: the README's table of commands names every command of the tree and
// no other, with exactly each command's subcommands (`kobe lease create|list|…`), and for
// `kobe completion` exactly the shells it takes.
func TestREADMECommandTable(t *testing.T) {
	f, _, _ := newRoot(t)
	tree := NewCmdRoot(f)
	readme := readmeCommands(t)

	var inTree []string
	for _, c := range tree.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		inTree = append(inTree, c.Name())
		var want []string
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" {
				want = append(want, sub.Name())
			}
		}
		if len(want) == 0 {
			want = c.ValidArgs // kobe completion's shells
		}
		got := readme[c.Name()]
		sort.Strings(want)
		sort.Strings(got)
		assert.Equal(t, want, got, "README: what `kobe %s` lists", c.Name())
	}
	var named []string
	for name := range readme {
		named = append(named, name)
	}
	sort.Strings(inTree)
	sort.Strings(named)
	assert.Equal(t, inTree, named, "the commands of the tree (left) and of the README's table (right)")
}
