package ownership

import (
	"maps"
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
	r := in.Rule
	type weight struct{ bytes, encoded int64 }
	// claim is one claimant's claim of one name: the weights are in one
	// map of them, not a map per name, which at 50,000 names was most of
	// what a decision allocates.
	type claim struct {
		name    string
		toolSet types.NamespacedName
	}
	n := 0
	for _, cl := range in.Claims {
		n += len(cl.Names)
	}
	contests := make(map[string]*Contest, n)
	weights := make(map[claim]weight, n)
	uids := make(map[types.NamespacedName]types.UID, len(in.Claims))
	created := make(map[types.NamespacedName]time.Time, len(in.Claims))
	for _, cl := range in.Claims {
		uids[cl.ToolSet], created[cl.ToolSet] = cl.UID, cl.Created
		for i, name := range cl.Names {
			c := contests[name]
			if c == nil {
				c = &Contest{Name: name, Hold: in.Hold}
				if rec, ok := prev[name]; ok {
					c.Owner = rec.Owner
				}
				contests[name] = c
			}
			claimant := Claimant{Created: cl.Created}
			if d, ok := cl.Denied[name]; ok {
				claimant.Denied = &d
			}
			c.Claimants.Set(cl.ToolSet, claimant)
			var wt weight
			if i < len(cl.Bytes) {
				wt.bytes = cl.Bytes[i]
			}
			if i < len(cl.Encoded) {
				wt.encoded = cl.Encoded[i]
			}
			weights[claim{name, cl.ToolSet}] = wt
		}
	}
	names := slices.Sorted(maps.Keys(contests))
	owners := make(map[string]Outcome, len(contests))
	// before is the record each name's owner is weighed against: prev's,
	// or none where the owner in prev is gone.
	before := make(map[string]Record, len(prev))
	for _, name := range names {
		c := contests[name]
		rec := prev[name]
		if rec.Owner != (types.NamespacedName{}) && !SameObject(rec.UID, uids[rec.Owner]) {
			if _, claims := c.Claimants.Get(rec.Owner); claims {
				// The owner was deleted and created again under its name:
				// the old object let go first, and the name went by the rule
				// among the others; the new object claims as any newcomer.
				without := Contest{Name: name, Hold: c.Hold}
				for ts, cl := range c.Claimants.All() {
					if ts != rec.Owner {
						without.Claimants.Set(ts, cl)
					}
				}
				c.Owner = types.NamespacedName{}
				if o := r.Resolve(without); o.Owned() {
					c.Owner = o.Owner
				} else {
					rec = Record{}
				}
			}
		}
		if rec.Owner != (types.NamespacedName{}) {
			before[name] = rec
		}
		owners[name] = r.Resolve(*c)
	}

	var over map[string]map[types.NamespacedName]Denial
	// orig are the claims the budget denied, as they were.
	orig := map[string]map[types.NamespacedName]Claimant{}
	encodedBound := false
	entriesOf := func() []Entry {
		out := make([]Entry, 0, len(owners))
		for _, name := range names {
			o := owners[name]
			if !o.Owned() {
				continue
			}
			w := weights[claim{name, o.Owner}]
			out = append(out, Entry{Name: name, ToolSet: o.Owner, Created: created[o.Owner], Bytes: w.bytes, Encoded: w.encoded,
				Kept: before[name].Owner == o.Owner})
		}
		return out
	}
	entries := entriesOf()
	for {
		denied, enc := in.Budget.apply(entries)
		if len(denied) == 0 {
			break
		}
		encodedBound = encodedBound || enc
		if over == nil {
			over = map[string]map[types.NamespacedName]Denial{}
		}
		for name, d := range denied {
			c := contests[name]
			owner := owners[name].Owner
			cl, _ := c.Claimants.Get(owner)
			if orig[name] == nil {
				orig[name] = map[types.NamespacedName]Claimant{}
			}
			orig[name][owner] = cl
			cl.Denied = &d
			c.Claimants.Set(owner, cl)
			if over[name] == nil {
				over[name] = map[types.NamespacedName]Denial{}
			}
			over[name][owner] = d
			// The denied owner is not the owner: the name goes by the rule.
			owners[name] = r.Resolve(*c)
		}
		entries = entriesOf()
	}
	// A claim the budget denied lost the name to the owner now: it is
	// Conflicted, as it would be if that owner had held the name first, so
	// that deciding again from the outcome tells every claimant the same.
	// Only a name nobody may publish stays Denied for the budget.
	for name, was := range orig {
		if !owners[name].Owned() {
			continue
		}
		for ts, cl := range was {
			contests[name].Claimants.Set(ts, cl)
		}
		delete(over, name)
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
		for _, name := range names {
			denied := over[name]
			if len(denied) == 0 {
				continue
			}
			c := contests[name]
			for _, ts := range slices.SortedFunc(maps.Keys(denied), func(a, b types.NamespacedName) int {
				if Earlier(a, created[a], b, created[b]) {
					return -1
				}
				return 1
			}) {
				w := weights[claim{name, ts}]
				e := Entry{Name: name, ToolSet: ts, Created: created[ts], Bytes: w.bytes, Encoded: w.encoded}
				dn, ok := in.Budget.Fits(t, e)
				if !ok {
					denied[ts] = dn
					cl, _ := c.Claimants.Get(ts)
					cl.Denied = &dn
					c.Claimants.Set(ts, cl)
					continue
				}
				for ts, cl := range orig[name] {
					c.Claimants.Set(ts, cl)
				}
				owners[name] = Outcome{Owner: ts}
				delete(over, name)
				t.Add(e)
				admitted = true
				break
			}
		}
		if admitted {
			entries = entriesOf()
		}
		// Each denial names the ceiling the claim passes beside the outcome,
		// whatever the order the claims were weighed in.
		for name, denied := range over {
			c := contests[name]
			for ts := range denied {
				w := weights[claim{name, ts}]
				dn, _ := in.Budget.Fits(t, Entry{Name: name, ToolSet: ts, Created: created[ts], Bytes: w.bytes, Encoded: w.encoded})
				denied[ts] = dn
				cl, _ := c.Claimants.Get(ts)
				cl.Denied = &dn
				c.Claimants.Set(ts, cl)
			}
		}
	}
	if len(over) == 0 {
		over = nil
	}

	d := Decision{
		Ledger:       make(Ledger, len(entries)),
		Verdicts:     map[types.NamespacedName]map[string]Verdict{},
		Publish:      entries,
		OverBudget:   over,
		EncodedBound: encodedBound,
	}
	for _, e := range entries {
		d.Ledger[e.Name] = NextRecord(before[e.Name], e.ToolSet, uids[e.ToolSet], in.Now)
	}
	for _, name := range names {
		c := contests[name]
		o := owners[name]
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
