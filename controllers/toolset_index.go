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
// never makes those. Where a ToolSet's selector and Service name are its
// own, as in make bench-scale, each key is a set of one member, and the
// second keys cost as much as the first: 3.3 MB at 5,000 ToolSets of
// bench-scale's shape added once to a bare indexer (660 bytes a ToolSet);
// a fifth of that where the same names repeat in many namespaces. With
// one key a value, client-go also skips re-indexing an update whose key
// did not change, as every status write is; with two it removed and added
// both again. In the manager's heap at 5,000 ToolSets the informers'
// indexes went from 9.6 to 2.5 MB (heap-converged.pprof, sampled).
//
// The index's name and keys are those IndexField makes ("field:" and the
// field, the namespace, "/" and the value; a cluster-scoped object's
// under "__all_namespaces"), so client.List with client.MatchingFields and
// client.InNamespace reads it as it reads one IndexField made; a List of a
// namespaced kind that names no namespace finds nothing. The spec "A
// ToolSet index under the namespace only" holds the two to the same keys.
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
		ns := o.GetNamespace()
		if ns == "" {
			ns = "__all_namespaces"
		}
		values := extract(o)
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = ns + "/" + v
		}
		return keys, nil
	}})
}
