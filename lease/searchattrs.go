package lease

import (
	"github.com/kunobi-ninja/kobe/api"
	"go.temporal.io/sdk/temporal"
)

// Custom search attributes on lease workflows, so that operators can filter leases by pool,
// owner and phase in the Temporal Web UI (e.g. KobePool="ci" AND KobePhase="Bound"). They must
// be registered on the namespace (kobe does it at start where it may, see api.EnsureSearchAttributes).
var (
	SearchAttributePool  = temporal.NewSearchAttributeKeyKeyword("KobePool")
	SearchAttributeOwner = temporal.NewSearchAttributeKeyKeyword("KobeOwner")
	SearchAttributePhase = temporal.NewSearchAttributeKeyKeyword("KobePhase")
)

// SearchAttributes are the attributes a lease workflow starts with.
func SearchAttributes(in Input) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		SearchAttributePool.ValueSet(in.Pool),
		SearchAttributeOwner.ValueSet(in.Principal),
		SearchAttributePhase.ValueSet(string(api.LeasePending)),
	)
}

// BoundSearchAttributes are the attributes of a lease its pool starts on a warm bind (already
// Bound), by name, for pool.BindRequest.
func BoundSearchAttributes(in Input) map[string]string {
	return map[string]string{
		SearchAttributePool.GetName():  in.Pool,
		SearchAttributeOwner.GetName(): in.Principal,
		SearchAttributePhase.GetName(): string(api.LeaseBound),
	}
}
