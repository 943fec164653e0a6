package ownership

import (
	"iter"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// maxFewClaimants is how many claimants a [Claimants] keeps in place and in
// a slice before it takes a map.
const maxFewClaimants = 8

// Claimants are the ToolSets that claim one name, each once. The zero value
// is empty and ready to use. A publisher keeps one for every published
// name, and most names have a single claimant, so the first is kept in
// place: a pointer to what its claim's names share (the ToolSet and its
// creation time, see claimantID) and one to its denial, 16 bytes and no
// allocation of its own. A few more are kept in a slice beside it, and a
// map is made only for a name with many (a map costs some 600 bytes even
// for one entry). Kept as a ToolSet and a Claimant in a slice of its own,
// one claimant cost 64 bytes more a name, 3.2 MB at 50,000 names. A copy
// shares its storage but for the first with the original: write through
// one and keep only that.
type Claimants struct {
	first entry
	rest  *moreClaimants
}

// moreClaimants are the claimants of a name besides the first, in few, or
// all of them in many once there are more than maxFewClaimants (first is
// then empty).
type moreClaimants struct {
	few  []entry
	many map[types.NamespacedName]entry
}

// entry is one claimant; id is nil for none.
type entry struct {
	id     *claimantID
	denied *Denial
}

// claimantID is what every name of one claim shares: who claims, and when
// the claimant was created. Nothing modifies one once made: a claimant of
// another creation time gets another.
type claimantID struct {
	ts      types.NamespacedName
	created time.Time
}

func (e entry) claimant() Claimant { return Claimant{Created: e.id.created, Denied: e.denied} }

// ClaimantsOf returns the claimants of m.
func ClaimantsOf(m map[types.NamespacedName]Claimant) Claimants {
	var c Claimants
	for ts, cl := range m {
		c.Set(ts, cl)
	}
	return c
}

func (c Claimants) many() map[types.NamespacedName]entry {
	if c.rest == nil {
		return nil
	}
	return c.rest.many
}

func (c Claimants) few() []entry {
	if c.rest == nil {
		return nil
	}
	return c.rest.few
}

// Len returns the number of claimants.
func (c Claimants) Len() int {
	if m := c.many(); m != nil {
		return len(m)
	}
	if c.first.id == nil {
		return 0
	}
	return 1 + len(c.few())
}

// Get returns the claim of ts, if ts claims the name.
func (c Claimants) Get(ts types.NamespacedName) (Claimant, bool) {
	e, ok := c.lookup(ts)
	if !ok {
		return Claimant{}, false
	}
	return e.claimant(), true
}

// lookup returns the entry of ts, if ts claims the name.
func (c Claimants) lookup(ts types.NamespacedName) (entry, bool) {
	if m := c.many(); m != nil {
		e, ok := m[ts]
		return e, ok
	}
	if c.first.id != nil && c.first.id.ts == ts {
		return c.first, true
	}
	for _, e := range c.few() {
		if e.id.ts == ts {
			return e, true
		}
	}
	return entry{}, false
}

// All yields every claimant, in no particular order.
func (c Claimants) All() iter.Seq2[types.NamespacedName, Claimant] {
	return func(yield func(types.NamespacedName, Claimant) bool) {
		for e := range c.entries() {
			if !yield(e.id.ts, e.claimant()) {
				return
			}
		}
	}
}

// entries yields every claimant's entry, in no particular order.
func (c Claimants) entries() iter.Seq[entry] {
	return func(yield func(entry) bool) {
		if m := c.many(); m != nil {
			for _, e := range m {
				if !yield(e) {
					return
				}
			}
			return
		}
		if c.first.id == nil || !yield(c.first) {
			return
		}
		for _, e := range c.few() {
			if !yield(e) {
				return
			}
		}
	}
}

// without returns the claimants of c but ts, in storage of their own.
func (c Claimants) without(ts types.NamespacedName) Claimants {
	var out Claimants
	for e := range c.entries() {
		if e.id.ts != ts {
			out.set(e)
		}
	}
	return out
}

// Set records the claim of ts, replacing any it had.
func (c *Claimants) Set(ts types.NamespacedName, cl Claimant) {
	e, ok := c.lookup(ts)
	if !ok || !e.id.created.Equal(cl.Created) {
		e.id = &claimantID{ts: ts, created: cl.Created}
	}
	e.denied = cl.Denied
	c.set(e)
}

// set records the claim e, replacing any of its ToolSet.
func (c *Claimants) set(e entry) {
	ts := e.id.ts
	if m := c.many(); m != nil {
		m[ts] = e
		return
	}
	if c.first.id == nil || c.first.id.ts == ts {
		c.first = e
		return
	}
	if c.rest == nil {
		c.rest = &moreClaimants{}
	}
	for i := range c.rest.few {
		if c.rest.few[i].id.ts == ts {
			c.rest.few[i] = e
			return
		}
	}
	if 1+len(c.rest.few) < maxFewClaimants {
		c.rest.few = append(c.rest.few, e)
		return
	}
	m := make(map[types.NamespacedName]entry, len(c.rest.few)+2)
	m[c.first.id.ts] = c.first
	for _, f := range c.rest.few {
		m[f.id.ts] = f
	}
	m[ts] = e
	c.first, c.rest.few, c.rest.many = entry{}, nil, m
}

// Delete drops the claim of ts, if any.
func (c *Claimants) Delete(ts types.NamespacedName) {
	if m := c.many(); m != nil {
		delete(m, ts)
		return
	}
	few := c.few()
	switch {
	case c.first.id == nil:
		return
	case c.first.id.ts == ts:
		if len(few) == 0 {
			c.first = entry{}
			return
		}
		c.first = few[len(few)-1]
	default:
		i := slices.IndexFunc(few, func(e entry) bool { return e.id.ts == ts })
		if i < 0 {
			return
		}
		few[i] = few[len(few)-1]
	}
	few[len(few)-1] = entry{}
	if few = few[:len(few)-1]; len(few) == 0 {
		c.rest = nil
		return
	}
	c.rest.few = few
}
