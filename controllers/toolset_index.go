package controllers

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// indexInNamespace indexes the objects of obj's kind by field in cache c,
// as c.IndexField does, but under each object's namespace only.
//
// IndexField keys every value twice: in the object's namespace and again
// across all namespaces, for lists that name no namespace. The reconciler
// never makes those, and a ToolSet's selector and Service name are mostly
// its own, so each key is a set of one member: the second keys were half
// of the index's memory, some 0.9 KB a ToolSet (4 MB at 5,000 ToolSets).
//
// The index's name and keys are those IndexField makes ("field:" and the
// field, the namespace, "/" and the value), so client.List with
// client.MatchingFields and client.InNamespace reads it as it reads one
// IndexField made; a List that names no namespace finds nothing.
// TestIndexInNamespaceListsAsIndexField holds the two to the same keys.
func indexInNamespace(ctx context.Context, c crcache.Cache, obj client.Object, field string, extract client.IndexerFunc) error {
	inf, err := c.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return inf.AddIndexers(toolscache.Indexers{"field:" + field: func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("indexing by %s: %T is not an object", field, raw)
		}
		values := extract(o)
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = o.GetNamespace() + "/" + v
		}
		return keys, nil
	}})
}
