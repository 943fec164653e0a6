package harness

import (
	"fmt"
	"sync"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Required is a lower bound on the tool table: tools that must be in every
// version of it, each published for its ToolSet. Pass its Check to
// WatchTable to hold every version the watch shows to it.
type Required struct {
	mu    sync.Mutex
	names map[string]spec.ObjectReference
	lost  []string
}

// Add requires names, published for owner, from now on.
func (r *Required) Add(owner spec.ObjectReference, names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]spec.ObjectReference{}
	}
	for _, n := range names {
		r.names[n] = owner
	}
}

// Remove stops requiring names, before whatever makes them go.
func (r *Required) Remove(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		delete(r.names, n)
	}
}

// Check records every required tool that t lacks or publishes for another
// ToolSet.
func (r *Required) Check(t *spec.Table) {
	got := Names(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, owner := range r.names {
		if ref, ok := got[name]; !ok {
			r.lost = append(r.lost, fmt.Sprintf("table %s (%d tools) lacks %s of %s", t.Revision, len(t.Tools), name, owner))
		} else if ref != owner {
			r.lost = append(r.lost, fmt.Sprintf("table %s publishes %s for %s, not %s", t.Revision, name, ref, owner))
		}
	}
}

// Lost returns what Check found missing, oldest first.
func (r *Required) Lost() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lost...)
}
