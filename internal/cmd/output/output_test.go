package output

import (
	"bytes"
	"io"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type thing struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
}

func TestFlagChecksTheValueWhenParsed(t *testing.T) {
	for _, tc := range []struct {
		allowed []string
		args    []string
		want    string
		err     string
	}{
		{nil, nil, "table", ""},
		{nil, []string{"-o", "yaml"}, "yaml", ""},
		{nil, []string{"--output=json"}, "json", ""},
		{nil, []string{"-o", "xml"}, "", `invalid argument "xml" for "-o, --output" flag: -o "xml": must be table, json or yaml`},
		{[]string{"text", "json"}, nil, "text", ""},
		{[]string{"text", "json"}, []string{"-o", "table"}, "", `-o "table": must be text or json`},
	} {
		ran := false
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
		f := AddFlag(cmd, tc.allowed...)
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetOut(io.Discard)
		err := cmd.Execute()
		if tc.err != "" {
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			assert.False(t, ran, "a bad -o stops before the command runs")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, f.String())
	}
}

func TestPrint(t *testing.T) {
	v := thing{Name: "ci", Count: 2}
	table := func(w io.Writer) error { _, err := io.WriteString(w, "TABLE\n"); return err }
	var buf bytes.Buffer
	f := NewFormat()
	require.NoError(t, f.Print(&buf, v, table))
	assert.Equal(t, "TABLE\n", buf.String())

	buf.Reset()
	require.NoError(t, f.Set(JSON))
	require.NoError(t, f.Print(&buf, v, table))
	assert.Equal(t, "{\n  \"name\": \"ci\",\n  \"count\": 2\n}\n", buf.String())

	buf.Reset()
	require.NoError(t, f.Set(YAML))
	require.NoError(t, f.Print(&buf, v, table))
	assert.Equal(t, "count: 2\nname: ci\n", buf.String(), "YAML uses the JSON names")

	require.NoError(t, f.Set(Table))
	assert.Error(t, f.Print(&buf, v, nil))
	assert.True(t, f.Is(Table))
	assert.Equal(t, "format", f.Type())
}
