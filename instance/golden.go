package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/addons"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// Golden templates (spec.backend.<type>.datastore.goldenTemplates, backends.GoldenTemplater):
// Provision of a member of such a pool first makes sure that the template of the pool's
// current generation exists (EnsureGoldenTemplate builds it once: a builder instance, the
// pool's addons, the freeze, the builder deleted), then creates the member from it and skips
// the addons, which its database already holds; the readiness gates still run on the member.

// GoldenGeneration is the generation of a pool's golden template: a hash of what goes into it
// (pool, Kubernetes version, backend options, addons). A change of any of them is a new
// generation, hence a new template. EnsureGoldenTemplate computes it and returns it to
// Provision (so that the workflow holds no hashing nor encoding of its own).
func GoldenGeneration(spec backends.InstanceSpec, addons []poolspec.Addon) string {
	data, _ := json.Marshal(struct {
		Pool    string           `json:"pool"`
		Version string           `json:"version"`
		Options json.RawMessage  `json:"options,omitempty"`
		Addons  []poolspec.Addon `json:"addons,omitempty"`
	}{spec.Pool, spec.KubernetesVersion, spec.Options, addons})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
}

// GoldenRequest asks for the golden template of a member's pool: Spec is the member's (its
// pool, version and options are the builder's), Addons the pool's.
type GoldenRequest struct {
	Backend string                `json:"backend"`
	Spec    backends.InstanceSpec `json:"spec"`
	Addons  []poolspec.Addon      `json:"addons,omitempty"`
}

// ErrNoGoldenTemplates is the non-retryable error type of a backend without golden templates.
const ErrNoGoldenTemplates = "NoGoldenTemplates"

// goldenBuilds serialises the builds of one template in this worker: members provisioned at
// once wait for the first one's build instead of building their own.
var goldenBuilds sync.Map // template key -> *sync.Mutex

// EnsureGoldenTemplate returns the generation of the member's pool's template and builds the
// template unless it exists: a builder instance is created and waited for, the addons are
// applied to it, the backend freezes its database as the template, and the builder is deleted
// (also when a step fails).
func (a *Activities) EnsureGoldenTemplate(ctx context.Context, req GoldenRequest) (string, error) {
	req.Spec.Golden = GoldenGeneration(req.Spec, req.Addons)
	return req.Spec.Golden, a.ensureGoldenTemplate(ctx, req)
}

func (a *Activities) ensureGoldenTemplate(ctx context.Context, req GoldenRequest) error {
	b, err := a.backend(req.Backend)
	if err != nil {
		return err
	}
	g, ok := b.(backends.GoldenTemplater)
	if !ok {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("backend %s has no golden templates", req.Backend), ErrNoGoldenTemplates, nil)
	}
	hb := startHeartbeat(ctx, "golden template "+req.Spec.Golden)
	defer hb.close()
	l, _ := goldenBuilds.LoadOrStore(req.Backend+"/"+req.Spec.Pool+"/"+req.Spec.Golden, &sync.Mutex{})
	mu := l.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	ready, err := g.GoldenTemplateReady(ctx, req.Spec)
	if err != nil {
		return nonRetryableIfInvalid(err)
	}
	if ready {
		return nil
	}
	builder := req.Spec
	builder.ID, builder.Golden = backends.GoldenBuilderID(req.Spec), ""
	err = a.buildGolden(ctx, b, g, builder, req, hb)
	// The builder is deleted whatever happened: its keys must sign nothing after the freeze,
	// and a failed build is started again from nothing.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if derr := b.Delete(dctx, builder.ID); derr != nil {
		err = errors.Join(err, fmt.Errorf("deleting the golden builder %s: %w", builder.ID, derr))
	}
	if err != nil {
		return nonRetryableIfInvalid(fmt.Errorf("building the golden template %s of pool %s: %w", req.Spec.Golden, req.Spec.Pool, err))
	}
	activity.GetLogger(ctx).Info("golden template built", "pool", req.Spec.Pool, "generation", req.Spec.Golden)
	return nil
}

func (a *Activities) buildGolden(ctx context.Context, b backends.RuntimeBackend, g backends.GoldenTemplater, builder backends.InstanceSpec, req GoldenRequest, hb *heartbeater) error {
	hb.set("creating the golden builder " + builder.ID)
	if _, err := b.Create(ctx, builder); err != nil {
		return err
	}
	if _, err := b.WaitReady(ctx, builder.ID, nil); err != nil {
		return err
	}
	if len(req.Addons) > 0 {
		cfg, err := a.adminConfig(ctx, req.Backend, builder.ID)
		if err != nil {
			return err
		}
		for _, addon := range req.Addons {
			hb.set("applying addon " + addon.Name + " to the golden builder")
			if err := addons.Apply(ctx, cfg, addon, nil); err != nil {
				if errors.Is(err, addons.ErrInvalid) {
					return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidAddon, nil)
				}
				return err
			}
		}
	}
	hb.set("freezing the golden template")
	return g.FreezeGoldenTemplate(ctx, builder.ID, req.Spec)
}

func nonRetryableIfInvalid(err error) error {
	if backends.IsInvalidSpec(err) {
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
	}
	return err
}

// goldenOptions: the template's build on the instance's host (a whole instance's create, its
// addons and a database copy), within the creating timeout.
func goldenOptions(queue string, creatingTimeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    creatingTimeout,
		ScheduleToCloseTimeout: creatingTimeout,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	}
}

// golden makes sure the template of the member's pool exists and returns the generation the
// member is created from ("" for a pool without golden templates: nothing is run).
func golden(ctx workflow.Context, in ProvisionInput, placement HostAssignment) (string, error) {
	//workflowcheck:ignore decoding bytes of the input into a struct is deterministic
	if !backends.WantsGoldenTemplates(in.Spec.Options) {
		return "", nil
	}
	var a *Activities
	req := GoldenRequest{Backend: in.Backend, Spec: in.Spec, Addons: in.Addons}
	gctx := workflow.WithActivityOptions(ctx, goldenOptions(placement.TaskQueue, in.CreatingTimeout))
	var generation string
	if err := workflow.ExecuteActivity(gctx, a.EnsureGoldenTemplate, req).Get(ctx, &generation); err != nil {
		return "", fmt.Errorf("golden template: %w", err)
	}
	return generation, nil
}
