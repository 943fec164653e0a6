package ownership

import (
	"iter"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Index keeps the ledger incrementally as claims come and go: the state of
// [Decide] applied step by step, so that a change costs what it touches,
// not the cluster. It holds no client, no clock of its own and no lock:
// the caller serialises the calls, and does the I/O its outcome asks for
// (see [Index.Drain]).
//
// Name by name, as claims change, it applies the rule; while the budget
// may bind it decides again as [Decide] does from the ledger before the
// change, incrementally where it can (see [Index.Rebudget]). Its property
// tests check that this is Decide from scratch at every step.
//
// The zero value is not ready: make one with [NewIndex].
type Index struct {
	// Budget returns the budget in force; nil caps nothing. The counts it
	// is checked against are kept as owners change, and counted again
	// when Rebudget finds MaxToolsPerNamespace changed.
	Budget func() Budget
	// Hold reports whether a name without an owner must wait (see
	// [Contest.Hold]); nil never holds.
	Hold func() bool
	// Weigh returns the encoded weight of the i-th name of ts's claim, for
	// Budget.MaxEncodedBytes; it is asked only while that is set. Nil
	// weighs nothing.
	Weigh func(ts types.NamespacedName, i int) int64
	// Now stamps the records of names that change hands; time.Now if nil.
	Now func() time.Time

	rule *Rule
	// claims are the ToolSets that claim at least one name; claimants
	// index them by name.
	claims    map[types.NamespacedName]*Indexed
	claimants map[string]Claimants
	ledger    Ledger
	// overBudget are the claims the budget denies, by name and claimant:
	// each was the name's owner when the budget denied it, and the name
	// passed on (see Decide).
	overBudget map[string]map[types.NamespacedName]Denial
	// ownedBytes is the sum of the owned entries' sizes, nsOwned the owned
	// names of each namespace, nsOverCap how many namespaces own more than
	// MaxToolsPerNamespace: they tell whether the budget may bind without
	// weighing the table.
	ownedBytes int64
	nsOwned    map[string]int
	nsOverCap  int
	// capCounted is the MaxToolsPerNamespace nsOverCap counts under.
	capCounted int
	// before holds, for every name whose owner changed since the last
	// Rebudget, its record before (the zero Record for nobody): the ledger
	// that change started from, which Decide weighs.
	before    map[string]Record
	conflicts int
	// encodedBound: the last decision under MaxEncodedBytes denied a claim
	// for it; encodedKept is the weight it kept.
	encodedBound bool
	encodedKept  int64
	// told are the ToolSets whose verdicts changed through another's
	// action, and moved reports that the ledger changed, since Drain.
	told  map[types.NamespacedName]struct{}
	moved bool
	// input is the claims of the last Input, kept to be filled again, and
	// buf what the last decision worked in.
	input []Claim
	buf   decideBuf
	// undecided: a claim changed as Decide weighs it, or the rule did,
	// since the last decision, made under decidedBudget and decidedHold.
	undecided     bool
	decidedBudget Budget
	decidedHold   bool
	// inc is the incremental decision (nil: the next one weighs every
	// name), dirty the names to weigh again in it, incBackoff how many
	// decisions are left to Decide (see rebudgetIncremental).
	inc        *incBudget
	dirty      map[string]struct{}
	incBackoff int
	// incDecisions and fullDecisions count the decisions made
	// incrementally and with Decide (see Decisions).
	incDecisions, fullDecisions int
}

// Indexed is one ToolSet's claim as the index keeps it.
type Indexed struct {
	Created time.Time
	// UID is the ToolSet's UID, empty if unknown.
	UID types.UID
	// Names are sorted, each once; Sizes are the bytes of each in the
	// table. Neither is modified once indexed.
	Names []string
	Sizes []int32
	// Denied are names among Names denied before the rule runs.
	Denied map[string]Denial

	// bytes are Sizes as Input weighs them, made once.
	bytes []int64
	// id is what the claimants of its names point at, set by Put: the
	// previous claim's while the claimant is the same, so that the names
	// it kept need not be touched, and never the claim itself, so that no
	// name keeps a claim replaced live. An Indexed is one ToolSet's: Put
	// one under another ToolSet and it takes an id of that one's.
	id *claimantID
}

// NewIndex returns an empty index under no policy.
func NewIndex() *Index {
	return &Index{
		undecided: true,
		claims:    map[types.NamespacedName]*Indexed{},
		claimants: map[string]Claimants{},
		ledger:    Ledger{},
		nsOwned:   map[string]int{},
		before:    map[string]Record{},
		told:      map[types.NamespacedName]struct{}{},
	}
}

// Ledger returns the ledger. It is the same map for the index's life,
// changed in place: read it only while no call is under way, and never
// write it.
func (x *Index) Ledger() Ledger { return x.ledger }

// Owner returns the owner of name, the zero value for nobody.
func (x *Index) Owner(name string) types.NamespacedName { return x.ledger[name].Owner }

// Conflicts returns how many claims lose their name to another claimant.
func (x *Index) Conflicts() int { return x.conflicts }

// OwnedBytes returns the sum of the owned entries' sizes, and the owned
// names of each namespace (the index's own map: do not modify it).
func (x *Index) OwnedBytes() (int64, map[string]int) { return x.ownedBytes, x.nsOwned }

// Encoded reports whether the last decision under Budget.MaxEncodedBytes
// denied a claim for it, and the encoded weight it kept.
func (x *Index) Encoded() (bound bool, kept int64) { return x.encodedBound, x.encodedKept }

// Decisions returns how many decisions the index made incrementally and
// how many with Decide over every claim (see Rebudget), since it was made.
func (x *Index) Decisions() (incremental, full int) { return x.incDecisions, x.fullDecisions }

// Rule returns the rule in force (nil for no policy).
func (x *Index) Rule() *Rule { return x.rule }

// Claimants returns the claimants of name.
func (x *Index) Claimants(name string) Claimants { return x.claimants[name] }

// All yields every claimed name and its claimants.
func (x *Index) All() iter.Seq2[string, Claimants] { return maps.All(x.claimants) }

// Drain calls tell with every ToolSet whose verdicts changed through
// another's action since the last Drain, and reports whether the ledger
// changed since then.
func (x *Index) Drain(tell func(types.NamespacedName)) (moved bool) {
	for ts := range x.told {
		tell(ts)
	}
	clear(x.told)
	moved, x.moved = x.moved, false
	return moved
}

func (x *Index) budget() Budget {
	if x.Budget == nil {
		return Budget{}
	}
	return x.Budget()
}

func (x *Index) holds() bool { return x.Hold != nil && x.Hold() }

func (x *Index) now() time.Time {
	if x.Now != nil {
		return x.Now()
	}
	return time.Now()
}

// Put replaces the claim of ts (nil removes it) and keeps the claimants,
// the owned bytes and the conflict count in step. It settles no name: see
// Offer. A name claimed before and after keeps its place in the index,
// and is not touched at all if its claim is the same.
func (x *Index) Put(ts types.NamespacedName, c *Indexed) {
	old := x.claims[ts]
	if c != nil {
		switch {
		case c.id != nil && c.id.ts == ts && c.id.created.Equal(c.Created):
		case old != nil && old.id != nil && old.id.ts == ts && old.id.created.Equal(c.Created):
			c.id = old.id
		default:
			c.id = &claimantID{ts: ts, created: c.Created}
		}
	}
	if !old.weighsAs(c) {
		x.undecided = true
		if x.inc != nil {
			if old != nil {
				for _, name := range old.Names {
					x.dirty[name] = struct{}{}
				}
			}
			if c != nil {
				for _, name := range c.Names {
					x.dirty[name] = struct{}{}
				}
			}
		}
	}
	if c == nil || len(c.Names) == 0 {
		delete(x.claims, ts)
	} else {
		x.claims[ts] = c
	}
	var now []string
	if c != nil {
		now = c.Names
	}
	var was []string
	if old != nil {
		was = old.Names
	}
	mergeNames(was, now, func(name string, i, j int) {
		// The owned entries' bytes follow the claim: its owner is unchanged.
		owned := x.ledger[name].Owner == ts
		if i >= 0 && owned {
			x.ownedBytes -= int64(old.Sizes[i])
		}
		if j < 0 {
			set := x.claimants[name]
			x.conflicts -= max(set.Len()-1, 0)
			set.Delete(ts)
			x.conflicts += max(set.Len()-1, 0)
			if set.Len() == 0 {
				delete(x.claimants, name)
			} else {
				x.claimants[name] = set
			}
			return
		}
		if owned {
			x.ownedBytes += int64(c.Sizes[j])
		}
		if i >= 0 && old.sameClaimant(c, name) {
			return
		}
		set := x.claimants[name]
		e := entry{id: c.id}
		if d, ok := c.Denied[name]; ok {
			// Through a call, so that only a denial costs an allocation.
			e.denied = ptrTo(d)
		}
		x.conflicts -= max(set.Len()-1, 0)
		set.set(e)
		x.conflicts += max(set.Len()-1, 0)
		x.claimants[name] = set
	})
}

// Offer puts c as the claim of ts, settles every name whose contest it
// changed (the names it adds or drops, and those whose creation time or
// denial changed), with ts as the actor, and reports with changed each
// name of either claim: whether it moved.
func (x *Index) Offer(ts types.NamespacedName, c *Indexed, changed func(name string, i, j int, moved bool)) {
	old := x.claims[ts]
	x.Put(ts, c)
	var was []string
	if old != nil {
		was = old.Names
	}
	mergeNames(was, c.Names, func(name string, i, j int) {
		// A name claimed before and after as it was has the same contest
		// as before, which the rule settled then.
		moved := (i < 0 || j < 0 || !old.sameClaimant(c, name)) && x.Resolve(name, ts)
		if changed != nil {
			changed(name, i, j, moved)
		}
	})
}

// Release drops every claim of ts and hands its names over; actor is the
// ToolSet whose action caused it (none for a restore that timed out). It
// reports whether ts claimed anything.
func (x *Index) Release(ts, actor types.NamespacedName) bool {
	c := x.claims[ts]
	if c == nil {
		return false
	}
	x.Put(ts, nil)
	for _, name := range c.Names {
		x.Resolve(name, actor)
	}
	return true
}

// Claim returns the claim of ts, nil for none.
func (x *Index) Claim(ts types.NamespacedName) *Indexed { return x.claims[ts] }

// SetOwner records rec as the ledger's entry for name (the zero Record for
// nobody), as when a table is read back, and keeps the counts the budget
// looks at in step.
func (x *Index) SetOwner(name string, rec Record) {
	x.markDirty(name)
	if _, ok := x.before[name]; !ok {
		x.before[name] = x.ledger[name]
	}
	if cur, ok := x.ledger[name]; ok {
		x.ownedBytes -= x.claims[cur.Owner].size(name)
		x.countOwned(cur.Owner.Namespace, -1)
		delete(x.ledger, name)
	}
	if rec.Owner == (types.NamespacedName{}) {
		return
	}
	x.ledger[name] = rec
	x.ownedBytes += x.claims[rec.Owner].size(name)
	x.countOwned(rec.Owner.Namespace, 1)
}

// Restored takes the ledger as it is now for the one before: the next
// decision starts from it. A table read back at start sets its owners
// through SetOwner, and they are what the owners held before, not changes
// to decide from the empty ledger under them: that would drop every owner
// past a budget lowered across the restart, and, hand-overs being held
// then, every other one with it.
func (x *Index) Restored() { clear(x.before) }

// countOwned adds delta to the names namespace owns.
func (x *Index) countOwned(namespace string, delta int) {
	limit := x.capCounted
	n := x.nsOwned[namespace]
	if limit > 0 && (n > limit) != (n+delta > limit) {
		x.nsOverCap += delta
	}
	if n+delta == 0 {
		delete(x.nsOwned, namespace)
	} else {
		x.nsOwned[namespace] = n + delta
	}
}

// Contest gathers what the rule needs to settle name. A claim the budget
// denied is denied in it.
func (x *Index) Contest(name string) Contest {
	set := x.claimants[name]
	if over := x.overBudget[name]; len(over) > 0 {
		// A copy: Claimants share their storage.
		var with Claimants
		for e := range set.entries() {
			if d, ok := over[e.id.ts]; ok {
				e.denied = ptrTo(d)
			}
			with.set(e)
		}
		set = with
	}
	return Contest{Name: name, Owner: x.ledger.Owner(name), Claimants: set, Hold: x.holds()}
}

// Resolve settles the owner of name after a change by actor and reports
// whether it moved. Every other claimant sees a new owner, so each is told.
func (x *Index) Resolve(name string, actor types.NamespacedName) bool {
	cur := x.ledger[name]
	out := x.rule.Resolve(x.Contest(name))
	if out.Owner == cur.Owner {
		return false
	}
	if out.Owned() {
		x.SetOwner(name, NextRecord(cur, out.Owner, x.claims[out.Owner].uid(), x.now()))
	} else {
		x.SetOwner(name, Record{})
	}
	for ts := range x.claimants[name].All() {
		if ts != actor {
			x.told[ts] = struct{}{}
		}
	}
	x.moved = true
	return true
}

// Settle resolves every claimed name, as when the rule or a hold changed,
// and returns how many moved.
func (x *Index) Settle() int {
	moved := 0
	for name := range x.claimants {
		if x.Resolve(name, types.NamespacedName{}) {
			moved++
		}
	}
	return moved
}

// SetRule replaces the rule, tells every claimant whose permission changed,
// and returns how many claims that is. It settles no name: see Settle.
func (x *Index) SetRule(rule *Rule) int {
	x.undecided = true
	x.inc = nil
	old := x.rule
	x.rule = rule
	changed := 0
	for name, claimants := range x.claimants {
		for ts := range claimants.All() {
			_, before := old.Permits(ts.Namespace, name)
			if _, after := rule.Permits(ts.Namespace, name); before != after {
				x.told[ts] = struct{}{}
				changed++
			}
		}
	}
	return changed
}

// Verdicts returns the rule's verdict on every name ts claims.
func (x *Index) Verdicts(ts types.NamespacedName) map[string]Verdict {
	c := x.claims[ts]
	if c == nil {
		return map[string]Verdict{}
	}
	out := make(map[string]Verdict, len(c.Names))
	for _, name := range c.Names {
		con := x.Contest(name)
		var o Outcome
		if con.Owner != (types.NamespacedName{}) {
			o.Owner = con.Owner
		} else {
			// Unowned: held (Pending) or every claimant is denied.
			o = x.rule.Resolve(con)
		}
		out[name] = x.rule.Verdict(con, o, ts)
	}
	return out
}

// Governed counts the claims of the names policy matches, and those of
// them from the namespaces it does not permit.
func (x *Index) Governed(policy Policy) (governed, denied int) {
	for name, claimants := range x.claimants {
		if !policy.Matches(name) {
			continue
		}
		for ts := range claimants.All() {
			governed++
			if !policy.Permits(ts.Namespace) {
				denied++
			}
		}
	}
	return governed, denied
}

// mayBind reports whether the budget may deny some owned name now, from
// the counts kept as owners change: no table is weighed for it.
func (x *Index) mayBind(b Budget) bool {
	return x.nsOverCap > 0 || (b.MaxTableBytes > 0 && x.ownedBytes > b.MaxTableBytes) || b.MaxEncodedBytes > 0
}

// Rebudget brings the ledger to what Decide makes of it with the budget,
// after the rule settled the names a change touched. While the budget
// cannot bind and denies nobody, the rule's outcome is the decision
// already, and this costs nothing; so while nothing Decide weighs changed
// since the last decision (outside the compressed ceiling and holds).
// Otherwise it decides incrementally where it can (see incBudget): a
// changed offer costs what it touches, its namespace's names and the
// entries the budget's cut passes over (some 0.1 ms of CPU at 50,000 names
// in 5,000 namespaces, BenchmarkOfferBinding; 0.7 ms in 100 of 500 names,
// BenchmarkRebudget), and the outcome is Decide's all the same. It
// decides every claim again with Decide under a compressed ceiling, while
// hand-overs are held, and for a while after a denied name had another
// claimant to pass to: that costs some 100 ms at 50,000 names, in slices
// the index keeps between decisions. A tenant can keep a denied name
// contested (two ToolSets of its namespace claiming the same names past
// its cap), so the caller must bound how often it asks for those: the
// table publisher decides the changes that come within nine times such a
// decision's duration together (see Decisions).
func (x *Index) Rebudget() {
	defer clear(x.before)
	b := x.budget()
	if b.MaxToolsPerNamespace != x.capCounted {
		// The cap changed: count the namespaces over it again.
		x.capCounted, x.nsOverCap = b.MaxToolsPerNamespace, 0
		for _, n := range x.nsOwned {
			if x.capCounted > 0 && n > x.capCounted {
				x.nsOverCap++
			}
		}
	}
	if len(x.overBudget) == 0 && !x.mayBind(b) {
		// What the decisions worked in goes with the pressure.
		x.buf, x.inc = decideBuf{}, nil
		x.undecided = true
		return
	}
	hold := x.holds()
	if !x.undecided && len(x.before) == 0 && b == x.decidedBudget && !hold && !x.decidedHold && b.MaxEncodedBytes <= 0 {
		// Nothing Decide weighs changed since the last decision, whose
		// outcome the index holds: Decide applied to its own outcome
		// changes nothing, so this decides nothing. (Not while hand-overs
		// are held: a name the budget denied is Pending, not Denied, once
		// nobody owned it before.) So a re-offer of the
		// same names and sizes, as every scrape of an unchanged ToolSet
		// makes, costs no decision while the budget binds. (Under
		// MaxEncodedBytes it decides anyway: whether that ceiling denied a
		// claim is of the last decision, which relaxing it reads.)
		return
	}
	if x.rebudgetIncremental(b, hold) {
		x.incDecisions++
		x.undecided, x.decidedBudget, x.decidedHold = false, b, hold
		return
	}
	// Decided from the ledger before the change, as if from scratch: the
	// rule's incremental outcome may differ from it wherever the budget
	// denied a claim.
	// The ledger with before over it, looked up, not copied: at 50,000
	// names a copy was a tenth of what a decision allocates.
	prev := func(name string) (Record, bool) {
		if rec, ok := x.before[name]; ok {
			return rec, rec.Owner != (types.NamespacedName{})
		}
		rec, ok := x.ledger[name]
		return rec, ok
	}
	x.fullDecisions++
	in := x.Input(b, x.now())
	x.apply(decide(prev, in, &x.buf), b)
	x.undecided, x.decidedBudget, x.decidedHold = false, b, hold
	// The claims are kept for the next decision; the weights they point
	// to are the claims' own.
	clear(in.Claims)
	x.input = in.Claims[:0]
}

// Input is what Decide weighs of the index now under budget b.
func (x *Index) Input(b Budget, now time.Time) Input {
	weigh := b.MaxEncodedBytes > 0 && x.Weigh != nil
	claims := x.input
	x.input = nil
	if cap(claims) < len(x.claims) {
		claims = make([]Claim, 0, len(x.claims))
	}
	in := Input{Rule: x.rule, Budget: b, Hold: x.holds(), Now: now, Claims: claims[:0]}
	for ts, c := range x.claims {
		if c.bytes == nil {
			// Once per claim: Sizes are not modified once indexed.
			c.bytes = make([]int64, len(c.Names))
			for i, s := range c.Sizes {
				c.bytes[i] = int64(s)
			}
		}
		cl := Claim{ToolSet: ts, Created: c.Created, UID: c.UID, Denied: c.Denied, Names: c.Names, Bytes: c.bytes}
		if weigh {
			cl.Encoded = make([]int64, len(c.Names))
			for i := range c.Names {
				cl.Encoded[i] = x.Weigh(ts, i)
			}
		}
		in.Claims = append(in.Claims, cl)
	}
	return in
}

// apply makes d, decided without verdicts, the index's state: every name that changed hands moves,
// and every claimant whose verdict may have changed is told.
func (x *Index) apply(d Decision, b Budget) {
	for name, rec := range x.ledger {
		if next, ok := d.record(name); !ok || next.Owner != rec.Owner || next.UID != rec.UID {
			x.tellClaimants(name)
			x.moved = true
			if !ok {
				x.SetOwner(name, Record{})
			}
		}
	}
	for k, next := range d.records {
		name := d.Publish[k].Name
		if rec, ok := x.ledger[name]; !ok || rec != next {
			if !ok || rec.Owner != next.Owner {
				x.tellClaimants(name)
				x.moved = true
			}
			x.SetOwner(name, next)
		}
	}
	for name, was := range x.overBudget {
		for ts, dn := range was {
			if is, ok := d.OverBudget[name][ts]; !ok || is != dn {
				x.told[ts] = struct{}{}
			}
		}
	}
	for name, is := range d.OverBudget {
		for ts := range is {
			if _, ok := x.overBudget[name][ts]; !ok {
				x.told[ts] = struct{}{}
			}
		}
	}
	x.overBudget = d.OverBudget
	if b.MaxEncodedBytes > 0 {
		x.encodedBound = d.EncodedBound
		x.encodedKept = 0
		for _, e := range d.Publish {
			x.encodedKept += e.Encoded
		}
	}
}

// tellClaimants marks every claimant of name to be told of a change.
func (x *Index) tellClaimants(name string) {
	for ts := range x.claimants[name].All() {
		x.told[ts] = struct{}{}
	}
}

// size returns the bytes of the claim's entry of name; zero if it claims
// no such name (or c is nil).
func (c *Indexed) size(name string) int64 {
	if c == nil {
		return 0
	}
	if i, ok := slices.BinarySearch(c.Names, name); ok {
		return int64(c.Sizes[i])
	}
	return 0
}

func (c *Indexed) uid() types.UID {
	if c == nil {
		return ""
	}
	return c.UID
}

// weighsAs reports whether Decide weighs claim b as c: the same names,
// sizes, creation time, UID and denials. A nil claim weighs as one of no
// names.
func (c *Indexed) weighsAs(b *Indexed) bool {
	if c == b {
		return true
	}
	if c == nil || b == nil {
		return (c == nil || len(c.Names) == 0) && (b == nil || len(b.Names) == 0)
	}
	return c.Created.Equal(b.Created) && c.UID == b.UID && slices.Equal(c.Names, b.Names) &&
		slices.Equal(c.Sizes, b.Sizes) && maps.Equal(c.Denied, b.Denied)
}

// sameClaimant reports whether c claims name, which both claim, as b does:
// with the same creation time and denial.
func (c *Indexed) sameClaimant(b *Indexed, name string) bool {
	dc, okc := c.Denied[name]
	db, okb := b.Denied[name]
	return c.Created.Equal(b.Created) && okc == okb && dc == db
}

// mergeNames calls fn with every name of a and b, both sorted, and its
// index in each (-1 where it has none).
func mergeNames(a, b []string, fn func(name string, i, j int)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			fn(a[i], i, -1)
			i++
		case i == len(a) || b[j] < a[i]:
			fn(b[j], -1, j)
			j++
		default:
			fn(a[i], i, j)
			i, j = i+1, j+1
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
