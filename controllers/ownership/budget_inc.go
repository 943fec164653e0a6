package ownership

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// incBudget is what the index keeps to decide the budget incrementally
// (see Index.rebudgetIncremental): Decide's first round, from the ledger
// of the last decision, kept up to date name by name, and the budget's
// cut through it.
//
// Where no name the budget denies has two claimants, Decide is three steps
// that need no second round (see Decide):
//
//  1. Each name goes to the owner the rule gives it from the ledger
//     before: its entry, Kept if that owner held it.
//  2. Budget.apply denies, in each namespace, the entries past
//     MaxToolsPerNamespace in claim order, and then, past MaxTableBytes,
//     the entries of the namespace that weighs most, its last first,
//     newcomers before what was Kept. That heap of namespaces is a merge
//     of each namespace's entries in reverse claim order, each keyed by
//     what its namespace weighs with it and those before it: so it
//     denies the shortest prefix of every entry in the order of trimKey
//     whose bytes bring the rest within the ceiling. A denied name has no
//     other claimant: nobody owns it, and the second round denies nothing,
//     for what is left fits.
//  3. The denied names, by name, each go to its claimant if it fits beside
//     what is kept and admitted so far.
//
// So the index keeps the entries of step 1 in a tree in trimKey order with
// their bytes (the cut of step 2 is a search of it), and the denied ones
// in a tree by name with their bytes (step 3 finds the next that fits in
// it). A change re-keys the namespace it touches, moves the cut over the
// entries between the old cut and the new, and admits what fits: it costs
// O((names changed + the namespace's names + entries the cut passes +
// names admitted) · log n), not the cluster.
type incBudget struct {
	b       Budget
	rule    *Rule
	entries map[string]*incEntry
	ns      map[string]*incNS
	// trim holds every entry within its namespace's MaxToolsPerNamespace,
	// total their bytes; denied those entries step 2 denies, by name.
	trim   *tree[trimKey]
	denied *tree[string]
	total  int64
	// cut is the last key step 2 denies, if hasCut.
	cut    trimKey
	hasCut bool
	// contested counts the denied entries whose name has another
	// claimant: while there is one, the decision is Decide's.
	contested int
	// admitted are the names step 3 admitted: owned, though step 2 denies
	// them. They are weighed again at the next decision.
	admitted []string
	// all: every name is to be weighed, the index having none yet.
	all bool
}

// incEntry is a name's entry in step 1.
type incEntry struct {
	name    string
	ts      types.NamespacedName
	created time.Time
	bytes   int64
	kept    bool
	// before is the record Decide weighs the owner against.
	before Record
	// contested: the name has another claimant the rule would give it.
	contested bool
	key       trimKey
	// inTrim: within MaxToolsPerNamespace, in the trim tree; capped: past it.
	inTrim, capped bool
	// denied by step 2; admitted by step 3.
	denied, admitted bool
}

// trimKey orders the entries as step 2 denies them: newcomers before what
// was kept, then by what the namespace weighs with the entry and those
// before it in claim order, most first, then by namespace, then the
// entry's place in claim order, last first.
type trimKey struct {
	newcomer bool
	weight   int64
	ns       string
	at       int32
}

func compareTrim(a, b trimKey) int {
	if a.newcomer != b.newcomer {
		if a.newcomer {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(b.weight, a.weight), strings.Compare(a.ns, b.ns), cmp.Compare(b.at, a.at))
}

// incNS is one namespace's entries.
type incNS struct {
	names map[string]*incEntry
	// list is names in claim order, as last re-keyed.
	list []*incEntry
	// left counts the entries of list within MaxToolsPerNamespace that
	// step 2 does not deny.
	left int
	// full: the namespace held MaxToolsPerNamespace at the last decision;
	// closed: when its step 3 began.
	full, closed bool
}

func newIncBudget(b Budget, rule *Rule) *incBudget {
	return &incBudget{
		b: b, rule: rule, all: true,
		entries: map[string]*incEntry{},
		ns:      map[string]*incNS{},
		trim:    newTree(compareTrim),
		denied:  newTree(strings.Compare),
	}
}

// markDirty records that name is to be weighed again at the next decision.
func (x *Index) markDirty(name string) {
	if x.inc != nil {
		x.dirty[name] = struct{}{}
	}
}

// prevRecord is the record of name in the ledger of the last decision.
func (x *Index) prevRecord(name string) (Record, bool) {
	if rec, ok := x.before[name]; ok {
		return rec, rec.Owner != (types.NamespacedName{})
	}
	rec, ok := x.ledger[name]
	return rec, ok
}

// firstRound returns the entry of name in Decide's first round from the
// ledger of the last decision, nil if nobody owns it then.
func (x *Index) firstRound(name string) *incEntry {
	set := x.claimants[name]
	if set.Len() == 0 {
		return nil
	}
	rec, owned := x.prevRecord(name)
	if !owned {
		rec = Record{}
	}
	owner := rec.Owner
	if owned {
		if _, claims := set.Get(rec.Owner); claims && !SameObject(rec.UID, x.claims[rec.Owner].uid()) {
			// As Decide: the old object let go first.
			owner = types.NamespacedName{}
			if o := x.rule.Resolve(Contest{Name: name, Claimants: set.without(rec.Owner)}); o.Owned() {
				owner = o.Owner
			} else {
				rec = Record{}
			}
		}
	}
	out := x.rule.Resolve(Contest{Name: name, Owner: owner, Claimants: set})
	if !out.Owned() {
		return nil
	}
	c := x.claims[out.Owner]
	e := &incEntry{name: name, ts: out.Owner, created: c.Created, bytes: c.size(name),
		kept: rec.Owner == out.Owner, before: rec}
	if set.Len() > 1 {
		// Contested if denying the owner would pass the name on.
		for ts, cl := range set.All() {
			if ts != out.Owner && x.rule.eligible(name, ts, cl) {
				e.contested = true
				break
			}
		}
	}
	return e
}

// setDenied makes e denied by step 2 or not, and reports whether it changed.
func (inc *incBudget) setDenied(e *incEntry, denied bool) bool {
	if e.denied == denied {
		return false
	}
	e.denied = denied
	d := 1
	if denied {
		inc.denied.insert(e.name, inc.deniedWeight(e), e)
	} else {
		inc.denied.delete(e.name)
		d = -1
	}
	if e.contested {
		inc.contested += d
	}
	if st := inc.ns[e.ts.Namespace]; st != nil && !e.capped && st.names[e.name] == e {
		st.left -= d
	}
	return true
}

// closed is the weight in the denied tree of the entries of a namespace
// that holds MaxToolsPerNamespace: more than any room step 3 looks for.
const closed = math.MaxInt64

// deniedWeight is e's weight in the denied tree: its bytes, or closed.
func (inc *incBudget) deniedWeight(e *incEntry) int64 {
	if st := inc.ns[e.ts.Namespace]; st != nil && st.closed {
		return closed
	}
	return e.bytes
}

// drop takes e out of the trees.
func (inc *incBudget) drop(e *incEntry) {
	inc.setDenied(e, false)
	if e.inTrim {
		inc.trim.delete(e.key)
		inc.total -= e.bytes
		e.inTrim = false
	}
}

// inCut reports whether step 2 denies an entry of key k.
func (inc *incBudget) inCut(k trimKey) bool {
	return inc.hasCut && compareTrim(k, inc.cut) <= 0
}

// rebudgetIncremental decides the budget as Decide would from the ledger
// of the last decision, at the cost of what changed since (see incBudget),
// and reports whether it did: it does not under a compressed ceiling,
// while hand-overs are held, nor while a name the budget denies has
// another claimant, and then the caller decides with Decide.
func (x *Index) rebudgetIncremental(b Budget, hold bool) bool {
	if b.MaxEncodedBytes > 0 || hold {
		x.inc = nil
		return false
	}
	if x.incBackoff > 0 {
		x.incBackoff--
		return false
	}
	if x.inc == nil || x.inc.b != b || x.inc.rule != x.rule {
		x.inc = newIncBudget(b, x.rule)
		x.dirty = map[string]struct{}{}
	}
	inc := x.inc
	now := x.now()
	// The names to weigh again: what changed, and what step 3 admitted.
	dirty := x.dirty
	x.dirty = map[string]struct{}{}
	for _, name := range inc.admitted {
		dirty[name] = struct{}{}
	}
	inc.admitted = inc.admitted[:0]
	if inc.all {
		for name := range x.claimants {
			dirty[name] = struct{}{}
		}
		for name := range x.ledger {
			dirty[name] = struct{}{}
		}
		for name := range x.overBudget {
			dirty[name] = struct{}{}
		}
		inc.all = false
	}
	// Step 1, for those names.
	dirtyNS := map[string]struct{}{}
	for name := range dirty {
		if old := inc.entries[name]; old != nil {
			inc.drop(old)
			st := inc.ns[old.ts.Namespace]
			delete(st.names, name)
			dirtyNS[old.ts.Namespace] = struct{}{}
			delete(inc.entries, name)
		}
		e := x.firstRound(name)
		if e == nil {
			continue
		}
		inc.entries[name] = e
		st := inc.ns[e.ts.Namespace]
		if st == nil {
			st = &incNS{names: map[string]*incEntry{}}
			inc.ns[e.ts.Namespace] = st
		}
		st.names[name] = e
		dirtyNS[e.ts.Namespace] = struct{}{}
	}
	// Re-key the namespaces they touch: the entries whose place or weight
	// before them changed take new keys; what step 2 made of each is
	// weighed again below.
	limit := b.MaxToolsPerNamespace
	var rekeyed []*incEntry
	var keys []trimKey
	for ns := range dirtyNS {
		st := inc.ns[ns]
		if len(st.names) == 0 {
			delete(inc.ns, ns)
			continue
		}
		st.list = st.list[:0]
		for _, e := range st.names {
			st.list = append(st.list, e)
		}
		slices.SortFunc(st.list, func(a, b *incEntry) int { return claimOrder(a.entry(), b.entry()) })
		// Every key that changes out first, then the new ones in: an entry
		// may take the key another held.
		keys = keys[:0]
		var weight int64
		for i, e := range st.list {
			capped := limit > 0 && i >= limit
			var key trimKey
			if !capped {
				weight += e.bytes
				key = trimKey{newcomer: !e.kept, weight: weight, ns: ns, at: int32(i)}
			}
			keys = append(keys, key)
			if e.inTrim && (capped || key != e.key) {
				inc.trim.delete(e.key)
				inc.total -= e.bytes
				e.inTrim = false
			}
			e.capped = capped
		}
		for i, e := range st.list {
			if !e.capped && !e.inTrim {
				e.key = keys[i]
				inc.trim.insert(e.key, e.bytes, e)
				inc.total += e.bytes
				e.inTrim = true
			}
		}
		rekeyed = append(rekeyed, st.list...)
	}
	// Step 2: the cut, and the entries it passes over.
	oldCut, oldHas := inc.cut, inc.hasCut
	inc.hasCut = false
	var deniedBytes int64
	if b.MaxTableBytes > 0 && inc.total > b.MaxTableBytes {
		inc.cut, deniedBytes, inc.hasCut = inc.trim.cut(inc.total - b.MaxTableBytes)
	}
	var changed []*incEntry
	touched := map[string]struct{}{}
	for ns := range dirtyNS {
		touched[ns] = struct{}{}
	}
	if oldHas != inc.hasCut || (oldHas && compareTrim(oldCut, inc.cut) != 0) {
		lo, hasLo, hi := oldCut, oldHas, inc.cut
		if !inc.hasCut || (oldHas && compareTrim(inc.cut, oldCut) < 0) {
			lo, hasLo, hi = inc.cut, inc.hasCut, oldCut
		}
		inc.trim.between(lo, hasLo, hi, true, func(n *node[trimKey]) {
			if inc.setDenied(n.e, inc.inCut(n.key)) {
				changed = append(changed, n.e)
				touched[n.key.ns] = struct{}{}
			}
		})
	}
	for _, e := range rekeyed {
		if inc.setDenied(e, e.capped || inc.inCut(e.key)) {
			changed = append(changed, e)
		}
	}
	for ns := range dirtyNS {
		// Counted again: an entry's place past the cap or within it may
		// have changed with its denial.
		if st := inc.ns[ns]; st != nil {
			st.left = 0
			for _, e := range st.list {
				if !e.capped && !e.denied {
					st.left++
				}
			}
		}
	}
	if inc.contested > 0 {
		// A denied name passes to another claimant, whom the budget weighs
		// in a round of its own: Decide's.
		x.inc = nil
		x.incBackoff = incBackoff
		return false
	}
	// Step 3: in name order, the denied names that fit beside what is kept.
	// The denied entries of a namespace that holds MaxToolsPerNamespace
	// cannot: they weigh closed in the denied tree, so that a namespace
	// of many tools past its cap costs step 3 nothing while it stays full.
	for ns := range touched {
		st := inc.ns[ns]
		if st == nil {
			continue
		}
		if full := limit > 0 && st.left >= limit; full != st.closed {
			st.closed = full
			for _, e := range st.list {
				if st.names[e.name] == e && e.denied {
					inc.denied.delete(e.name)
					inc.denied.insert(e.name, inc.deniedWeight(e), e)
				}
			}
		}
	}
	slack := int64(closed - 1)
	if b.MaxTableBytes > 0 {
		slack = b.MaxTableBytes - (inc.total - deniedBytes)
	}
	var admitted []*incEntry
	var extra map[string]int
	var after string
	for has := false; ; has = true {
		n := inc.denied.firstFit(after, has, slack)
		if n == nil {
			break
		}
		e := n.e
		after = n.key
		st := inc.ns[e.ts.Namespace]
		if limit > 0 && st.left+extra[e.ts.Namespace] >= limit {
			continue
		}
		if extra == nil {
			extra = map[string]int{}
		}
		extra[e.ts.Namespace]++
		e.admitted = true
		admitted = append(admitted, e)
		inc.admitted = append(inc.admitted, e.name)
		touched[e.ts.Namespace] = struct{}{}
		slack -= e.bytes
	}
	// Every name whose outcome may have changed: those weighed again, those
	// the cut passed over, those admitted, and the denied names of a
	// namespace that filled or emptied, whose denials name another ceiling.
	for ns := range touched {
		st := inc.ns[ns]
		if st == nil {
			continue
		}
		full := limit > 0 && st.left+extra[ns] >= limit
		if full == st.full {
			continue
		}
		st.full = full
		for _, e := range st.list {
			if st.names[e.name] == e && e.denied && !e.admitted {
				dirty[e.name] = struct{}{}
			}
		}
	}
	for _, e := range changed {
		dirty[e.name] = struct{}{}
	}
	for _, e := range admitted {
		dirty[e.name] = struct{}{}
	}
	for name := range dirty {
		x.applyInc(name, now)
	}
	return true
}

// incBackoff is how many decisions the index leaves to Decide after a
// denied name with another claimant made it fall back.
const incBackoff = 16

// entry is e as Budget.apply weighs it.
func (e *incEntry) entry() Entry {
	return Entry{Name: e.name, ToolSet: e.ts, Created: e.created, Bytes: e.bytes, Kept: e.kept}
}

// applyInc makes the index's state for name what the incremental decision
// made of it, telling whoever that changes.
func (x *Index) applyInc(name string, now time.Time) {
	inc := x.inc
	e := inc.entries[name]
	cur, has := x.ledger[name]
	if owned := e != nil && (!e.denied || e.admitted); e != nil && e.kept != owned {
		// Kept or not at the next decision: weighed again then.
		x.dirty[name] = struct{}{}
	}
	if e != nil && (!e.denied || e.admitted) {
		want := NextRecord(e.before, e.ts, x.claims[e.ts].uid(), now)
		if !has || cur.Owner != e.ts {
			x.tellClaimants(name)
			x.moved = true
		}
		if !has || cur != want {
			x.SetOwner(name, want)
		}
	} else if has {
		x.tellClaimants(name)
		x.moved = true
		x.SetOwner(name, Record{})
	}
	was := x.overBudget[name]
	if e == nil || !e.denied || e.admitted {
		if len(was) > 0 {
			for ts := range was {
				x.told[ts] = struct{}{}
			}
			delete(x.overBudget, name)
		}
		return
	}
	st := inc.ns[e.ts.Namespace]
	c := passesTableBytes
	if st.full {
		c = passesNamespace
	}
	d := inc.b.denial(c, e.ts.Namespace)
	if dn, ok := was[e.ts]; ok && len(was) == 1 && dn == d {
		return
	}
	for ts := range was {
		x.told[ts] = struct{}{}
	}
	x.told[e.ts] = struct{}{}
	if x.overBudget == nil {
		x.overBudget = map[string]map[types.NamespacedName]Denial{}
	}
	x.overBudget[name] = map[types.NamespacedName]Denial{e.ts: d}
}
