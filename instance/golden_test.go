package instance_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
)

var goldenAddons = []poolspec.Addon{{Name: "ns", Manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: golden}\n"}}

// A member of a pool with golden templates: the template of the pool's generation is ensured
// first, the member is created from it (spec.golden), and the addons are not applied again.
func TestProvisionOfAGoldenMemberSkipsItsAddons(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}}
	env, _ := provisionEnv(t, fb)
	golden := spec
	golden.Options = json.RawMessage(`{"datastore":{"secretRef":"pg","goldenTemplates":true}}`)
	in := instance.ProvisionInput{Backend: "fake", Spec: golden, Addons: goldenAddons}
	var ensured []instance.GoldenRequest
	env.OnActivity("EnsureGoldenTemplate", mock.Anything, mock.Anything).Return(func(_ context.Context, req instance.GoldenRequest) (string, error) {
		ensured = append(ensured, req)
		return instance.GoldenGeneration(req.Spec, req.Addons), nil
	})
	var created []backends.InstanceSpec
	env.OnActivity("BackendCreate", mock.Anything, mock.Anything).Return(func(ctx context.Context, req instance.BackendRequest) (backends.InstanceStatus, error) {
		created = append(created, req.Spec)
		return fb.Create(ctx, req.Spec)
	})
	env.OnActivity("ApplyAddons", mock.Anything, mock.Anything).Return(func(context.Context, instance.AddonsRequest) error {
		t.Error("the addons of a golden member were applied again")
		return nil
	})
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, ensured, 1)
	gen := instance.GoldenGeneration(golden, goldenAddons)
	assert.Equal(t, golden, ensured[0].Spec)
	assert.Equal(t, goldenAddons, ensured[0].Addons, "the builder gets the addons")
	require.Len(t, created, 1)
	assert.Equal(t, gen, created[0].Golden, "the member starts from the template")
}

// The generation changes with whatever goes into the template, and only then.
func TestGoldenGenerationFollowsTheSpec(t *testing.T) {
	base := instance.ProvisionInput{Spec: backends.InstanceSpec{ID: "p-1", Pool: "p", KubernetesVersion: "v1.37.2",
		Options: json.RawMessage(`{"datastore":{"secretRef":"pg","goldenTemplates":true}}`)}, Addons: goldenAddons}
	gen := func(in instance.ProvisionInput) string { return instance.GoldenGeneration(in.Spec, in.Addons) }
	g := gen(base)
	other := base
	other.Spec.ID = "p-2"
	assert.Equal(t, g, gen(other), "the member's id is not part of it")
	for name, change := range map[string]func(*instance.ProvisionInput){
		"version": func(in *instance.ProvisionInput) { in.Spec.KubernetesVersion = "v1.36.0" },
		"addons":  func(in *instance.ProvisionInput) { in.Addons = nil },
		"options": func(in *instance.ProvisionInput) {
			in.Spec.Options = json.RawMessage(`{"datastore":{"secretRef":"pg2","goldenTemplates":true}}`)
		},
		"pool": func(in *instance.ProvisionInput) { in.Spec.Pool = "q" },
	} {
		c := base
		change(&c)
		assert.NotEqual(t, g, gen(c), name)
	}
	assert.True(t, backends.WantsGoldenTemplates(base.Spec.Options))
	assert.False(t, backends.WantsGoldenTemplates(json.RawMessage(`{"datastore":{"secretRef":"pg"}}`)))
	assert.False(t, backends.WantsGoldenTemplates(nil))
}
