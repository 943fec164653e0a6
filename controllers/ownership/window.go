package ownership

import (
	"iter"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Window is the restore window. After a start or a failover the owners
// read back from the table are kept, and a name without an owner waits,
// until every ToolSet that existed at start has been heard from (offered,
// retained, withdrawn, or was found deleted), or the caller closes the
// window when its bound has passed: so that a name changes hands by
// creation time, not by who is reconciled first. While it is open,
// [Index.Hold] should report [Window.Restoring].
//
// It holds no client, no clock and no lock: the caller serialises the
// calls, times the bound and does what the window's end asks (drop the
// restored entries of the ToolSets never heard from, settle the names
// that waited). The zero value is a closed window.
type Window struct {
	awaiting   map[types.NamespacedName]struct{}
	restoring  bool
	holdWrites bool
}

// Open opens the window on toolSets, the ToolSets that exist at start; on
// none it stays closed. unreadable: the table could not be read back, and
// nothing is written while the window is open (see [Window.HoldsWrites]).
// It replaces whatever the window awaited before.
func (w *Window) Open(toolSets iter.Seq[types.NamespacedName], unreadable bool) {
	w.awaiting = make(map[types.NamespacedName]struct{})
	for ts := range toolSets {
		w.awaiting[ts] = struct{}{}
	}
	w.restoring = len(w.awaiting) > 0
	w.holdWrites = unreadable && w.restoring
}

// Restoring reports whether the window is open: hand-overs are held.
func (w *Window) Restoring() bool { return w.restoring }

// HoldsWrites reports whether the table must not be written: it could not
// be read back, and the window is open.
func (w *Window) HoldsWrites() bool { return w.holdWrites }

// Awaits reports whether toolSet has not been heard from while the window
// is open.
func (w *Window) Awaits(toolSet types.NamespacedName) bool {
	_, ok := w.awaiting[toolSet]
	return ok
}

// Awaiting returns how many ToolSets the window still awaits.
func (w *Window) Awaiting() int { return len(w.awaiting) }

// Unheard returns the ToolSets the window still awaits, sorted by
// namespace, then name.
func (w *Window) Unheard() []types.NamespacedName {
	return slices.SortedFunc(maps.Keys(w.awaiting), compareToolSets)
}

// Heard records that toolSet has spoken since start, and reports whether
// that closed the window: it was the last ToolSet awaited. A ToolSet not
// awaited changes nothing.
func (w *Window) Heard(toolSet types.NamespacedName) (closed bool) {
	if _, ok := w.awaiting[toolSet]; !ok {
		return false
	}
	delete(w.awaiting, toolSet)
	if len(w.awaiting) > 0 || !w.restoring {
		return false
	}
	w.close()
	return true
}

// Close closes the window, whoever was not heard from, and reports whether
// it was open. The caller drops what it kept for [Window.Unheard] first.
func (w *Window) Close() (wasOpen bool) {
	if !w.restoring {
		return false
	}
	w.close()
	return true
}

func (w *Window) close() {
	clear(w.awaiting)
	w.restoring, w.holdWrites = false, false
}

func compareToolSets(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
