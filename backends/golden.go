package backends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// GoldenTemplater is a backend whose instances on a shared datastore can start from a copy of
// their pool's golden template: the database of a builder instance that had the pool's addons
// applied, frozen once per generation of the pool's spec. A member made from it (Create with
// spec.Golden set) needs no addons; it keeps an identity of its own (CA, serving and
// service-account keys are the member's, never the builder's).
type GoldenTemplater interface {
	// GoldenTemplateReady reports whether the template of spec.Golden for spec.Pool exists.
	GoldenTemplateReady(ctx context.Context, spec InstanceSpec) (bool, error)
	// FreezeGoldenTemplate stops the builder instance builderID (Ready, addons applied) and
	// makes its database the template of spec.Golden; the pool's templates of other
	// generations are dropped. The caller deletes the builder afterwards.
	FreezeGoldenTemplate(ctx context.Context, builderID string, spec InstanceSpec) error
}

// WantsGoldenTemplates reports whether a backend's options (spec.backend.<type>) ask for
// golden templates: {"datastore": {"goldenTemplates": true}}, the upstream field, in the same
// place for every backend that has a shared datastore. Pure: Provision decides with it.
func WantsGoldenTemplates(options json.RawMessage) bool {
	var o struct {
		Datastore *struct {
			GoldenTemplates *bool `json:"goldenTemplates"`
		} `json:"datastore"`
	}
	if len(options) == 0 || json.Unmarshal(options, &o) != nil {
		return false
	}
	return o.Datastore != nil && o.Datastore.GoldenTemplates != nil && *o.Datastore.GoldenTemplates
}

// GoldenTemplateID is the id the template of spec.Golden is named by on the datastore (as an
// instance id: the datastore derives its database name from it): "<pool>-golden-<generation>",
// so that the pool's leftovers list it; when that is no DNS label of 63, a hash of both.
func GoldenTemplateID(spec InstanceSpec) string {
	return goldenID(spec.Pool, spec.Golden, "")
}

// GoldenBuilderID is the id of the instance that builds the template of spec.Golden.
func GoldenBuilderID(spec InstanceSpec) string {
	return goldenID(spec.Pool, spec.Golden, "-build")
}

func goldenID(pool, generation, suffix string) string {
	id := pool + "-golden-" + generation + suffix
	if len(id) <= 63 {
		return id
	}
	sum := sha256.Sum256([]byte(pool + "/" + generation))
	return "golden-" + hex.EncodeToString(sum[:])[:20] + suffix
}
