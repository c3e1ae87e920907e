package server

import (
	"context"
	"fmt"

	"github.com/kunobi-ninja/kobe/lease"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

// EnsureSearchAttributes registers kobe's custom search attributes (KobePool, KobeOwner,
// KobePhase) on the namespace if they are missing. It needs the operator API: on a managed
// Temporal where kobe may not call it, the error says so and leases start without them.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("listing search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, key := range []string{lease.SearchAttributePool.GetName(), lease.SearchAttributeOwner.GetName(), lease.SearchAttributePhase.GetName()} {
		t, ok := have.GetCustomAttributes()[key]
		switch {
		case !ok:
			missing[key] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		case t != enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			return fmt.Errorf("search attribute %s exists on namespace %s with type %s; kobe needs Keyword", key, namespace, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("adding search attributes to namespace %s: %w", namespace, err)
	}
	return nil
}
