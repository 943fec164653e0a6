package ownership

import (
	"iter"
	"maps"

	"k8s.io/apimachinery/pkg/types"
)

// maxFewClaimants is how many claimants a [Claimants] keeps in a slice
// before it takes a map.
const maxFewClaimants = 8

// Claimants are the ToolSets that claim one name, each once. The zero value
// is empty and ready to use. A publisher keeps one for every published
// name, and most names have a single claimant, so a few are kept in a
// slice (64 bytes for one) and a map is made only for a contested name
// (a map costs some 600 bytes even for one entry). A copy shares its
// storage with the original: write through one and keep only that.
type Claimants struct {
	few  []entry
	many map[types.NamespacedName]Claimant
}

type entry struct {
	ts types.NamespacedName
	c  Claimant
}

// ClaimantsOf returns the claimants of m.
func ClaimantsOf(m map[types.NamespacedName]Claimant) Claimants {
	var c Claimants
	for ts, cl := range m {
		c.Set(ts, cl)
	}
	return c
}

// Len returns the number of claimants.
func (c Claimants) Len() int {
	if c.many != nil {
		return len(c.many)
	}
	return len(c.few)
}

// Get returns the claim of ts, if ts claims the name.
func (c Claimants) Get(ts types.NamespacedName) (Claimant, bool) {
	if c.many != nil {
		cl, ok := c.many[ts]
		return cl, ok
	}
	for i := range c.few {
		if c.few[i].ts == ts {
			return c.few[i].c, true
		}
	}
	return Claimant{}, false
}

// All yields every claimant, in no particular order.
func (c Claimants) All() iter.Seq2[types.NamespacedName, Claimant] {
	return func(yield func(types.NamespacedName, Claimant) bool) {
		if c.many != nil {
			maps.All(c.many)(yield)
			return
		}
		for _, e := range c.few {
			if !yield(e.ts, e.c) {
				return
			}
		}
	}
}

// Set records the claim of ts, replacing any it had.
func (c *Claimants) Set(ts types.NamespacedName, cl Claimant) {
	if c.many != nil {
		c.many[ts] = cl
		return
	}
	for i := range c.few {
		if c.few[i].ts == ts {
			c.few[i].c = cl
			return
		}
	}
	if len(c.few) < maxFewClaimants {
		c.few = append(c.few, entry{ts: ts, c: cl})
		return
	}
	c.many = make(map[types.NamespacedName]Claimant, len(c.few)+1)
	for _, e := range c.few {
		c.many[e.ts] = e.c
	}
	c.many[ts] = cl
	c.few = nil
}

// Delete drops the claim of ts, if any.
func (c *Claimants) Delete(ts types.NamespacedName) {
	if c.many != nil {
		delete(c.many, ts)
		return
	}
	for i := range c.few {
		if c.few[i].ts == ts {
			last := len(c.few) - 1
			c.few[i] = c.few[last]
			c.few[last] = entry{}
			c.few = c.few[:last]
			if len(c.few) == 0 {
				c.few = nil
			}
			return
		}
	}
}
