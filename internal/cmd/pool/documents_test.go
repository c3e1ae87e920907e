package pool

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stream as kubectl reads it: --- lines split it (a trailing comment on the separator too),
// documents of only comments and blank lines are dropped, a "---" inside a block scalar is not
// a separator.
func TestDocumentsSplitsAStreamAsKubectlDoes(t *testing.T) {
	stream := "# pools\n---\nkind: A\n--- # second\nkind: B\nnote: |\n  ---\n  text\n---\n# nothing\n\n---\n"
	docs, err := documents([]byte(stream))
	require.NoError(t, err)
	require.Len(t, docs, 2)
	assert.Equal(t, "kind: A\n", string(docs[0]))
	assert.Contains(t, string(docs[1]), "  ---\n  text")
	none, err := documents([]byte("# only a comment\n---\n"))
	require.NoError(t, err)
	assert.Empty(t, none)
}
