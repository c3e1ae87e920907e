package backends_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	_ "github.com/kunobi-ninja/kobe/backends/local"
)

func TestResolveNamesTheField(t *testing.T) {
	_, err := backends.Resolve("k9s")
	require.Error(t, err)
	assert.Equal(t, `spec.backend.type: unknown backend "k9s" (compiled in: local)`, err.Error())
	_, err = backends.Resolve("")
	assert.ErrorContains(t, err, "spec.backend.type: required")
	f, err := backends.Resolve("local")
	require.NoError(t, err)
	assert.Equal(t, "local", f.Name)
}

func TestRegisterTwicePanics(t *testing.T) {
	f, _ := backends.Lookup("local")
	assert.Panics(t, func() { backends.Register(f) })
}

// A registration that says something its Prototype contradicts is refused at init, by name.
func TestRegisterChecksTheTraits(t *testing.T) {
	local, _ := backends.Lookup("local")
	plain := backends.Factory{Name: "plain", New: local.New, Prototype: onlyName{"plain"}}
	withoutSleep := local
	withoutSleep.Traits.Sleep = false
	goldenless := plain
	goldenless.Traits.Golden = true
	hosted := local
	hosted.Traits.Hosted = true
	misnamed := plain
	misnamed.Prototype = onlyName{"other"}
	unbuildable := plain
	unbuildable.New = nil
	for name, tc := range map[string]struct {
		f    backends.Factory
		want string
	}{
		"a capability not declared": {withoutSleep, "its Prototype is a Sleeper: declare Traits.Sleep"},
		"a trait it has not":        {goldenless, "it declares Traits.Golden but its Prototype is no GoldenTemplater"},
		"hosted without a host":     {hosted, "a Hosted backend runs in a host cluster: declare HostCluster too"},
		"the name of another":       {misnamed, `its Prototype's Name() is "other"`},
		"nothing to build one":      {unbuildable, "a registration needs a Name, New and a Prototype"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, fmt.Sprintf("backend %q: %s", tc.f.Name, tc.want), func() { backends.Register(tc.f) })
		})
	}
	_, registered := backends.Lookup("plain")
	assert.False(t, registered)
}

// Without Options, a backend's instances get its own section as it is.
func TestPoolOptionsDefaultToTheSection(t *testing.T) {
	f := backends.Factory{Name: "x"}
	got, err := f.PoolOptions(backends.PoolSection{Field: "spec.backend.x", Own: json.RawMessage(`{"a":1}`), Datastore: json.RawMessage(`{}`)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1}`, string(got))
	_, err = backends.PoolSection{Field: "spec.backend.x", Own: json.RawMessage(`"a"`)}.Fields()
	assert.EqualError(t, err, "spec.backend.x: must be an object")
}

// onlyName is a backend with no optional capability.
type onlyName struct{ name string }

func (b onlyName) Name() string                                          { return b.name }
func (onlyName) Validate(backends.InstanceSpec) error                    { return nil }
func (onlyName) Delete(context.Context, string) error                    { return nil }
func (onlyName) RevokeCredentials(context.Context, string, string) error { return nil }
func (onlyName) Create(context.Context, backends.InstanceSpec) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{}, nil
}
func (onlyName) Status(context.Context, string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{}, nil
}
func (onlyName) WaitReady(context.Context, string, func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{}, nil
}
func (onlyName) Credentials(context.Context, string, backends.CredentialRequest) (backends.Credential, error) {
	return backends.Credential{}, nil
}
