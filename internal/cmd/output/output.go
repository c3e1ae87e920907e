// Package output is the -o/--output flag every command shares: its value is checked when the
// flag is parsed (so a bad -o fails before anything runs, with the same message everywhere),
// and Print renders a value as the chosen format.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Formats every command offers.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// Format is the value of -o: one of a fixed list, the first being the default.
type Format struct {
	value   string
	allowed []string
}

// NewFormat returns a format accepting allowed (the first is the default).
func NewFormat(allowed ...string) *Format {
	if len(allowed) == 0 {
		allowed = []string{Table, JSON, YAML}
	}
	return &Format{value: allowed[0], allowed: allowed}
}

// AddFlag registers -o/--output on cmd. Without allowed formats: table, json, yaml.
func AddFlag(cmd *cobra.Command, allowed ...string) *Format {
	f := NewFormat(allowed...)
	cmd.Flags().VarP(f, "output", "o", "output format: "+f.list())
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.allowed, cobra.ShellCompDirectiveNoFileComp
	})
	return f
}

// String returns the chosen format.
func (f *Format) String() string { return f.value }

// Type names the flag's value in help.
func (f *Format) Type() string { return "format" }

// Set checks and records a value (pflag calls it while parsing).
func (f *Format) Set(v string) error {
	if !slices.Contains(f.allowed, v) {
		return fmt.Errorf("-o %q: must be %s", v, f.list())
	}
	f.value = v
	return nil
}

// Is reports whether the chosen format is v.
func (f *Format) Is(v string) bool { return f.value == v }

func (f *Format) list() string {
	if len(f.allowed) == 1 {
		return f.allowed[0]
	}
	return strings.Join(f.allowed[:len(f.allowed)-1], ", ") + " or " + f.allowed[len(f.allowed)-1]
}

// Print writes v as JSON or YAML, or calls table for any other format (table, text…).
func (f *Format) Print(w io.Writer, v any, table func(io.Writer) error) error {
	switch f.value {
	case JSON:
		return WriteJSON(w, v)
	case YAML:
		return WriteYAML(w, v)
	}
	if table == nil {
		return fmt.Errorf("-o %s: not available here", f.value)
	}
	return table(w)
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteYAML writes v as YAML with its JSON field names.
func WriteYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
