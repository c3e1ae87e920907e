// Package jsonduration writes the time.Duration fields of a struct as Go duration strings
// ("10m0s") instead of nanoseconds, and reads both. Workflow inputs, signals and results are
// JSON in Temporal's history: with it, the Web UI shows a lease's TTL as "1h0m0s", not
// 3600000000000, and histories recorded before still decode.
//
// A type opts in with two methods that call Marshal and Unmarshal on a copy of itself without
// them (type plain T), so that the fields keep their time.Duration type everywhere else.
package jsonduration

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

var durationType = reflect.TypeOf(time.Duration(0))

// Marshal is json.Marshal of v (a struct), with its time.Duration fields as duration strings.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	fields := durationFields(reflect.TypeOf(v))
	if len(fields) == 0 {
		return raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	rv := reflect.ValueOf(v)
	for name, index := range fields {
		if _, ok := m[name]; !ok {
			continue // omitted (omitempty)
		}
		d := time.Duration(rv.FieldByIndex(index).Int())
		m[name], _ = json.Marshal(d.String())
	}
	return json.Marshal(m)
}

// Unmarshal is json.Unmarshal into v (a pointer to a struct), reading each time.Duration field
// from a duration string or from a number of nanoseconds.
func Unmarshal(data []byte, v any) error {
	t := reflect.TypeOf(v).Elem()
	fields := durationFields(t)
	if len(fields) == 0 || len(data) == 0 || data[0] != '{' {
		return json.Unmarshal(data, v)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	changed := false
	for key, raw := range m {
		if _, ok := fieldFor(fields, key); !ok || len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%s.%s: %q is not a duration", t.Name(), key, s)
		}
		m[key], _ = json.Marshal(int64(d))
		changed = true
	}
	if changed {
		var err error
		if data, err = json.Marshal(m); err != nil {
			return err
		}
	}
	return json.Unmarshal(data, v)
}

// fieldFor matches a JSON key to a field as encoding/json does: exactly, else without case.
func fieldFor(fields map[string][]int, key string) ([]int, bool) {
	if index, ok := fields[key]; ok {
		return index, true
	}
	for name, index := range fields {
		if strings.EqualFold(name, key) {
			return index, true
		}
	}
	return nil, false
}

// durationFields maps the JSON name of each exported time.Duration field of struct type t to
// its index: its own fields and those of the structs it embeds without a JSON name, which
// encoding/json writes as its own (leasestart.Input embeds poolspec.LeaseTerms). Fields of
// named or pointer struct fields are not (they are their own payloads).
func durationFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Type != durationType || !flattened(t, f.Index) {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		out[name] = f.Index
	}
	return out
}

// flattened says whether encoding/json writes the field at index of t among t's own: every
// struct on its way is embedded by value and without a JSON name.
func flattened(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		f := t.Field(i)
		if !f.Anonymous || f.Type.Kind() != reflect.Struct {
			return false
		}
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" {
			return false
		}
		t = f.Type
	}
	return true
}
