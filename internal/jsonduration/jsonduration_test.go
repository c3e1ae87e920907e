package jsonduration_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/jsonduration"
)

type input struct {
	Name    string        `json:"name"`
	TTL     time.Duration `json:"ttl"`
	Idle    time.Duration `json:"idle,omitempty"`
	Backoff time.Duration // no tag: the field's name, as encoding/json
	Count   int           `json:"count"`
}

func (in input) MarshalJSON() ([]byte, error) {
	type plain input
	return jsonduration.Marshal(plain(in))
}

func (in *input) UnmarshalJSON(b []byte) error {
	type plain input
	return jsonduration.Unmarshal(b, (*plain)(in))
}

func TestDurationsAreWrittenAsStringsAndReadBothWays(t *testing.T) {
	in := input{Name: "ci", TTL: time.Hour, Backoff: 1500 * time.Millisecond, Count: 3}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"ci","ttl":"1h0m0s","Backoff":"1.5s","count":3}`, string(raw), "idle is omitted")

	var back input
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, in, back)

	// What an older kobe recorded: nanoseconds.
	var old input
	require.NoError(t, json.Unmarshal([]byte(`{"name":"ci","ttl":3600000000000,"idle":60000000000,"backoff":2000000000}`), &old))
	assert.Equal(t, input{Name: "ci", TTL: time.Hour, Idle: time.Minute, Backoff: 2 * time.Second}, old)

	// Nested in another struct and in a slice, through the type's own methods.
	type outer struct {
		Inputs []input `json:"inputs"`
	}
	raw, err = json.Marshal(outer{Inputs: []input{in}})
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"ttl":"1h0m0s"`)

	assert.ErrorContains(t, json.Unmarshal([]byte(`{"ttl":"soon"}`), &back), `"soon" is not a duration`)
	require.NoError(t, json.Unmarshal([]byte(`null`), &back))
}

// terms is embedded by withTerms below: encoding/json writes its fields as withTerms's own,
// and so are its durations written as strings; a named struct field is its own payload.
type terms struct {
	TTL    time.Duration `json:"ttl"`
	MaxTTL time.Duration `json:"maxTtl,omitempty"`
}

type withTerms struct {
	ID string `json:"id"`
	terms
	Idle  time.Duration `json:"idle"`
	Named terms         `json:"named"`
}

func (w withTerms) MarshalJSON() ([]byte, error) {
	type plain withTerms
	return jsonduration.Marshal(plain(w))
}

func (w *withTerms) UnmarshalJSON(b []byte) error {
	type plain withTerms
	return jsonduration.Unmarshal(b, (*plain)(w))
}

func TestDurationsOfAnEmbeddedStructAreTheStructsOwn(t *testing.T) {
	in := withTerms{ID: "x", terms: terms{TTL: time.Hour, MaxTTL: 2 * time.Hour}, Idle: time.Minute, Named: terms{TTL: time.Second}}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"x","ttl":"1h0m0s","maxTtl":"2h0m0s","idle":"1m0s","named":{"ttl":1000000000}}`, string(raw),
		"the embedded struct's durations are flat strings; the named one is left to its own type")

	var back withTerms
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, in, back)
	var old withTerms
	require.NoError(t, json.Unmarshal([]byte(`{"id":"x","ttl":3600000000000,"maxTtl":"2h0m0s"}`), &old))
	assert.Equal(t, withTerms{ID: "x", terms: terms{TTL: time.Hour, MaxTTL: 2 * time.Hour}}, old)
}
