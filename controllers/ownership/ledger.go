package ownership

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Why says how an owner came to hold a name.
type Why string

// How an owner came to hold a name.
const (
	// Claimed: nobody held the name, and the owner was the earliest-created
	// permitted claimant.
	Claimed Why = "Claimed"
	// HandedOver: the previous owner let go of the name or lost the right
	// to it (it stopped claiming it, was deleted or created again, a policy
	// or a budget denied it), and the owner was the earliest-created
	// permitted claimant left.
	HandedOver Why = "HandedOver"
	// Restored: the owner was read back from the table at start.
	Restored Why = "Restored"
)

// Record is the ledger's entry for one owned name.
type Record struct {
	// Owner owns the name.
	Owner types.NamespacedName
	// UID is the UID of the owner object; empty if unknown (an entry
	// written before the table carried it). An object of the same name and
	// another UID is another claimant: its predecessor let go.
	UID types.UID
	// Since is when the owner took the name: the Now of the decision.
	Since time.Time
	// Why says how.
	Why Why
}

// Ledger records, for every owned name, who owns it, since when and why.
// Every name in it is in the table the publisher writes next, and only
// those: a claim the rule or a budget denies is not in it. A nil Ledger is
// empty.
type Ledger map[string]Record

// Owner returns the owner of name, the zero value for nobody.
func (l Ledger) Owner(name string) types.NamespacedName { return l[name].Owner }

// Input is everything [Decide] weighs.
type Input struct {
	// Rule holds the policies; nil for none.
	Rule *Rule
	// Claims are what every ToolSet claims now, one Claim per ToolSet.
	Claims []Claim
	// Budget caps what the owners publish together (see [Budget.Apply]).
	Budget Budget
	// Hold keeps a name without an owner unowned, as in [Contest.Hold].
	Hold bool
	// Now stamps the records of names that change hands.
	Now time.Time
}

// Decision is the outcome of [Decide].
type Decision struct {
	// Ledger is the owner of every owned name after the decision.
	Ledger Ledger
	// Verdicts holds, for every claimant, the verdict on each name it
	// claims. A verdict is final: Owned means the name is in Ledger and so
	// in the next table.
	Verdicts map[types.NamespacedName]map[string]Verdict
	// Publish are the owned names' entries, sorted by name: what the table
	// holds.
	Publish []Entry
	// OverBudget are the claims the budget denied, by name and claimant, of
	// the names nobody owns for it: each claim was the name's owner when
	// it was denied. A name the budget passed to another claimant is not
	// in it: its other claimants are Conflicted.
	OverBudget map[string]map[types.NamespacedName]Denial
	// EncodedBound reports whether Budget.MaxEncodedBytes denied some claim.
	EncodedBound bool

	// records, for the index, hold in place of Ledger the record of each
	// of Publish, and record looks one up by name.
	records []Record
	record  func(name string) (Record, bool)
}

// Decide settles every name from the ledger before (prev) and what is
// claimed now. It is the ownership rule of the package doc with the budget
// inside it:
//
//  1. Each name is resolved by [Rule.Resolve], its owner in prev standing
//     if it still claims the name under the same UID. A claim under
//     another UID than prev's is a new object of the old one's name: the old
//     one let go (a withdraw), and the new one claims as any newcomer.
//  2. The budget weighs the owned entries ([Budget.Apply]). Each owner it
//     denies is denied the claim (Denied, OverBudget) and the name is
//     resolved again: it passes to the next permitted claimant, or to
//     nobody. The budget then weighs the new owners in turn, until it
//     denies nobody more. Every round denies at least one claim more, so
//     this ends. What the owners kept from prev is denied only after every
//     newcomer (see [Entry.Kept]).
//  3. A name nobody owns for the budget goes to the first of its
//     claimants, in claim order, that fits beside the outcome, and every
//     claim still denied names the ceiling it passes beside the outcome.
//     A claim that lost a name to another claimant is Conflicted.
//
// So Decide applied to its own outcome changes nothing, verdicts included:
// a re-offer never moves a name or rewrites a status. (While hand-overs
// are held, step 3 is skipped: nobody is handed a name then.)
//
// The outcome depends on prev and in only, never on the order of claims
// or names. The table publisher applies it incrementally, name by name as
// claims change; its tests check that it agrees with Decide from scratch.
func Decide(prev Ledger, in Input) Decision {
	return decide(func(name string) (Record, bool) {
		rec, ok := prev[name]
		return rec, ok
	}, in, nil)
}

// decideBuf holds what decide works in, kept by the index from one
// decision to the next: at 50,000 names each slice is megabytes, and a
// budget that binds decides on every changed offer.
type decideBuf struct {
	ids                        map[string]int32
	names                      []string
	head, count, claimOf, next []int32
	weights                    []claimWeight
	contests                   []Contest
	backing                    []entry
	rests                      []moreClaimants
	claimIDs                   []claimantID
	owners                     []Outcome
	before                     []Record
	entries, scratch           []Entry
	at                         []int32
	records                    []Record
}

// claimWeight is what one claim of a name weighs.
type claimWeight struct{ bytes, encoded int64 }

// sized returns s with n zero elements, in s's storage if it has room.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// decide is Decide from the records prevOf returns. With buf, it works in
// buf and decides no verdicts, for the index: it asks for none (at 50,000
// names they were a sixth of what a decision allocated), and the
// decision's Publish and records are buf's, good until the next call. Names, claims and their weights are held in slices indexed
// by the name's place in sorted order, not in maps by name: a decision
// under a budget that binds looks each up several times.
func decide(prevOf func(string) (Record, bool), in Input, buf *decideBuf) Decision {
	verdicts := buf == nil
	if buf == nil {
		buf = &decideBuf{}
	}
	r := in.Rule
	type weight = claimWeight
	n := 0
	for _, cl := range in.Claims {
		n += len(cl.Names)
	}
	// ids gives each name its place in names, sorted.
	if buf.ids == nil {
		buf.ids = make(map[string]int32, n)
	}
	ids := buf.ids
	clear(ids)
	// Sorted and made unique in place: one insertion per name, not a
	// lookup, an insertion and an update.
	names := sized(buf.names, n)[:0]
	for _, cl := range in.Claims {
		names = append(names, cl.Names...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for j, name := range names {
		ids[name] = int32(j)
	}
	// Each claim of a name, in flat slices: a claim f of name j is of
	// claims[claimOf[f]], weighs weights[f], and the next claim of j is
	// next[f] (-1 for none), from head[j].
	var (
		head    = sized(buf.head, len(names))
		count   = sized(buf.count, len(names))
		claimOf = sized(buf.claimOf, n)[:0]
		weights = sized(buf.weights, n)[:0]
		next    = sized(buf.next, n)[:0]
	)
	for j := range head {
		head[j] = -1
	}
	for k, cl := range in.Claims {
		for i, name := range cl.Names {
			j := ids[name]
			var wt weight
			if i < len(cl.Bytes) {
				wt.bytes = cl.Bytes[i]
			}
			if i < len(cl.Encoded) {
				wt.encoded = cl.Encoded[i]
			}
			next = append(next, head[j])
			head[j] = int32(len(claimOf))
			claimOf = append(claimOf, int32(k))
			weights = append(weights, wt)
			count[j]++
		}
	}
	// find returns the claim of name j by ts, -1 for none.
	find := func(j int, ts types.NamespacedName) int32 {
		for f := head[j]; f >= 0; f = next[f] {
			if in.Claims[claimOf[f]].ToolSet == ts {
				return f
			}
		}
		return -1
	}
	created := func(j int, ts types.NamespacedName) time.Time {
		if f := find(j, ts); f >= 0 {
			return in.Claims[claimOf[f]].Created
		}
		return time.Time{}
	}
	weightOf := func(j int, ts types.NamespacedName) weight {
		if f := find(j, ts); f >= 0 {
			return weights[f]
		}
		return weight{}
	}
	uidOf := func(j int, ts types.NamespacedName) types.UID {
		if f := find(j, ts); f >= 0 {
			return in.Claims[claimOf[f]].UID
		}
		return ""
	}
	// The claimants of every name share one backing array, and every
	// claim's names one claimantID: a contest's few claimants need no
	// allocation of their own.
	contests := sized(buf.contests, len(names))
	backing := sized(buf.backing, n)
	rests := sized(buf.rests, len(names))
	claimIDs := sized(buf.claimIDs, len(in.Claims))
	for k := range in.Claims {
		claimIDs[k] = claimantID{ts: in.Claims[k].ToolSet, created: in.Claims[k].Created}
	}
	// before is the record each name's owner is weighed against: prev's,
	// or none where the owner in prev is gone. It starts as prev's, looked
	// up once.
	before := sized(buf.before, len(names))
	off := 0
	for j, name := range names {
		c := &contests[j]
		c.Name, c.Hold = name, in.Hold
		if rec, ok := prevOf(name); ok {
			c.Owner, before[j] = rec.Owner, rec
		}
		if m := int(count[j]); m > 1 && m <= maxFewClaimants {
			c.Claimants.rest = &rests[j]
			rests[j].few = backing[off : off : off+m-1]
			off += m - 1
		}
		for f := head[j]; f >= 0; f = next[f] {
			e := entry{id: &claimIDs[claimOf[f]]}
			if d, ok := in.Claims[claimOf[f]].Denied[name]; ok {
				// Through a call, so that only a denial costs an allocation.
				e.denied = ptrTo(d)
			}
			c.Claimants.set(e)
		}
	}
	owners := sized(buf.owners, len(names))
	for j, name := range names {
		c := &contests[j]
		rec := before[j]
		if rec.Owner != (types.NamespacedName{}) && !SameObject(rec.UID, uidOf(j, rec.Owner)) {
			if _, claims := c.Claimants.Get(rec.Owner); claims {
				// The owner was deleted and created again under its name:
				// the old object let go first, and the name went by the rule
				// among the others; the new object claims as any newcomer.
				without := Contest{Name: name, Hold: c.Hold, Claimants: c.Claimants.without(rec.Owner)}
				c.Owner = types.NamespacedName{}
				if o := r.Resolve(without); o.Owned() {
					c.Owner = o.Owner
				} else {
					rec = Record{}
				}
			}
		}
		before[j] = rec
		owners[j] = r.Resolve(*c)
	}

	var over map[string]map[types.NamespacedName]Denial
	// orig are the claims the budget denied, as they were, by name.
	orig := map[int32][]entry{}
	encodedBound := false
	entriesOf := func(out []Entry) []Entry {
		out = out[:0]
		for j, name := range names {
			o := owners[j]
			if !o.Owned() {
				continue
			}
			f := find(j, o.Owner)
			w, cl := weights[f], &in.Claims[claimOf[f]]
			out = append(out, Entry{Name: name, ToolSet: o.Owner, Created: cl.Created, Bytes: w.bytes, Encoded: w.encoded,
				Kept: before[j].Owner == o.Owner})
		}
		return out
	}
	entries := entriesOf(sized(buf.entries, len(names)))
	scratch := buf.scratch
	for {
		// apply sorts what it weighs: a copy, for entries stay by name.
		scratch = append(scratch[:0], entries...)
		denied, enc := in.Budget.apply(scratch)
		if len(denied) == 0 {
			break
		}
		encodedBound = encodedBound || enc
		if over == nil {
			over = map[string]map[types.NamespacedName]Denial{}
		}
		for name, d := range denied {
			j := ids[name]
			c := &contests[j]
			owner := owners[j].Owner
			e, _ := c.Claimants.lookup(owner)
			orig[j] = append(orig[j], e)
			c.Claimants.set(entry{id: e.id, denied: &d})
			if over[name] == nil {
				over[name] = map[types.NamespacedName]Denial{}
			}
			over[name][owner] = d
			// The denied owner is not the owner: the name goes by the rule.
			owners[j] = r.Resolve(*c)
		}
		entries = entriesOf(entries)
	}
	// A claim the budget denied lost the name to the owner now: it is
	// Conflicted, as it would be if that owner had held the name first, so
	// that deciding again from the outcome tells every claimant the same.
	// Only a name nobody may publish stays Denied for the budget.
	for j, was := range orig {
		if !owners[j].Owned() {
			continue
		}
		for _, e := range was {
			contests[j].Claimants.set(e)
		}
		delete(over, names[j])
	}
	// The budget denied greedily, and what it denied early may fit once
	// the rest is settled: each name nobody owns for the budget goes to the
	// first of its claimants, in claim order, that fits beside what is
	// kept. So the outcome leaves no room for any claim it denies, and
	// deciding again from it denies the same claims, for the same reasons.
	if len(over) > 0 && !in.Hold {
		var t Totals
		for _, e := range entries {
			t.Add(e)
		}
		admitted := false
		dns := denials{b: in.Budget}
		// order is a name's denied claimants in claim order, one name at a
		// time.
		var order []types.NamespacedName
		// The names nobody owns for the budget, in order.
		pending := make([]int32, 0, len(over))
		for name := range over {
			pending = append(pending, ids[name])
		}
		slices.Sort(pending)
		for _, j32 := range pending {
			j := int(j32)
			name := names[j]
			denied := over[name]
			if len(denied) == 0 {
				continue
			}
			c := &contests[j]
			order = order[:0]
			for ts := range denied {
				order = append(order, ts)
			}
			slices.SortFunc(order, func(a, b types.NamespacedName) int {
				if Earlier(a, created(j, a), b, created(j, b)) {
					return -1
				}
				return 1
			})
			for _, ts := range order {
				w := weightOf(j, ts)
				e := Entry{Name: name, ToolSet: ts, Created: created(j, ts), Bytes: w.bytes, Encoded: w.encoded}
				dn, ok := dns.fits(t, e)
				if !ok {
					denied[ts] = *dn
					e, _ := c.Claimants.lookup(ts)
					c.Claimants.set(entry{id: e.id, denied: dn})
					continue
				}
				for _, e := range orig[j32] {
					c.Claimants.set(e)
				}
				owners[j] = Outcome{Owner: ts}
				delete(over, name)
				t.Add(e)
				admitted = true
				break
			}
		}
		if admitted {
			entries = entriesOf(entries)
		}
		// Each denial names the ceiling the claim passes beside the outcome,
		// whatever the order the claims were weighed in.
		for name, denied := range over {
			j := int(ids[name])
			c := &contests[j]
			for ts := range denied {
				w := weightOf(j, ts)
				dn, _ := dns.fits(t, Entry{Name: name, ToolSet: ts, Created: created(j, ts), Bytes: w.bytes, Encoded: w.encoded})
				denied[ts] = *dn
				cl, _ := c.Claimants.Get(ts)
				cl.Denied = dn
				c.Claimants.Set(ts, cl)
			}
		}
	}
	if len(over) == 0 {
		over = nil
	}

	d := Decision{
		Publish:      entries,
		OverBudget:   over,
		EncodedBound: encodedBound,
	}
	if !verdicts {
		// The index's decision: the records by name in slices, not a map
		// of 50,000 of them it would only look up.
		at := sized(buf.at, len(names))
		d.records = sized(buf.records, len(entries))
		for k, e := range entries {
			j := int(ids[e.Name])
			at[j] = int32(k) + 1
			d.records[k] = NextRecord(before[j], e.ToolSet, uidOf(j, e.ToolSet), in.Now)
		}
		*buf = decideBuf{ids: ids, names: names, head: head, count: count, claimOf: claimOf, next: next, weights: weights,
			contests: contests, backing: backing, rests: rests, claimIDs: claimIDs, owners: owners, before: before, entries: entries, scratch: scratch,
			at: at, records: d.records}
		d.record = func(name string) (Record, bool) {
			j, ok := ids[name]
			if !ok || at[j] == 0 {
				return Record{}, false
			}
			return d.records[at[j]-1], true
		}
		return d
	}
	d.Ledger = make(Ledger, len(entries))
	for _, e := range entries {
		j := int(ids[e.Name])
		d.Ledger[e.Name] = NextRecord(before[j], e.ToolSet, uidOf(j, e.ToolSet), in.Now)
	}
	d.Verdicts = map[types.NamespacedName]map[string]Verdict{}
	for j, name := range names {
		c := &contests[j]
		o := owners[j]
		for ts := range c.Claimants.All() {
			vs := d.Verdicts[ts]
			if vs == nil {
				vs = map[string]Verdict{}
				d.Verdicts[ts] = vs
			}
			vs[name] = r.Verdict(*c, o, ts)
		}
	}
	return d
}

// NextRecord returns the record of a name owner owns after a decision at
// now, prev being its record before: kept if owner held it already, else
// a new one that says how owner came to hold it.
func NextRecord(prev Record, owner types.NamespacedName, uid types.UID, now time.Time) Record {
	if prev.Owner == owner && SameObject(prev.UID, uid) {
		if prev.UID == "" {
			prev.UID = uid
		}
		return prev
	}
	why := HandedOver
	if prev.Owner == (types.NamespacedName{}) {
		why = Claimed
	}
	return Record{Owner: owner, UID: uid, Since: now, Why: why}
}

// SameObject reports whether two UIDs may be of one object: equal, or one
// of them unknown.
func SameObject(a, b types.UID) bool { return a == "" || b == "" || a == b }

// Restore returns the ledger of a table read back at start: for each name,
// the owner among the ToolSets whose entries name it, with the record the
// table kept (since when and why it owns the name), or one that says
// Restored, since now, where the table kept none. A table written by
// this operator names each once; one written otherwise (by hand, or by two
// leaders at once) may name several, and then the rule settles it, never
// the order of the entries: the earliest-created of them, ties by
// namespace/name. created holds the creation time and UID of every owner
// that still exists; an entry whose owner does not, or under another UID,
// is dropped.
func Restore(entries []RestoredEntry, exists map[types.NamespacedName]Identity, now time.Time) Ledger {
	l := Ledger{}
	for _, e := range entries {
		id, ok := exists[e.ToolSet]
		if !ok || !SameObject(e.UID, id.UID) {
			continue
		}
		cur, taken := l[e.Name]
		if taken && cur.Owner != e.ToolSet {
			cid := exists[cur.Owner]
			if !Earlier(e.ToolSet, id.Created, cur.Owner, cid.Created) {
				continue
			}
		}
		rec := Record{Owner: e.ToolSet, UID: id.UID, Since: now, Why: Restored}
		if !e.Since.IsZero() && e.Why != "" {
			// The table kept the record: since and why stand.
			rec.Since, rec.Why = e.Since, e.Why
		}
		l[e.Name] = rec
	}
	return l
}

// RestoredEntry is one entry of a table read back: a name and the owner it
// names, and the record the table kept of it, if any.
type RestoredEntry struct {
	Name    string
	ToolSet types.NamespacedName
	UID     types.UID
	// Since and Why are the entry's record as the table kept it; zero if
	// it kept none (a table written before it kept records), and then the
	// record reads Restored, since now.
	Since time.Time
	Why   Why
}

// Identity tells one ToolSet object from another of its name.
type Identity struct {
	Created time.Time
	UID     types.UID
}
