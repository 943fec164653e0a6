package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// This file holds the publisher's side of claims: the tools each ToolSet
// offers, serialised under p.mu into the ownership index
// (ownership.Index), which keeps the ledger as the rule and the budget
// decide it, and into the restore window (ownership.Window), which holds
// hand-overs after a start until every ToolSet has spoken; the publisher
// writes what they say changed (a table to write, ToolSets to tell), times
// the window's bound, and logs and counts it.

// claim is what one ToolSet offers.
type claim struct {
	created metav1.Time
	// uid is the ToolSet's UID, empty if unknown (a table written before
	// entries carried it, or an offer without one).
	uid types.UID
	// tools are sorted by name, each name once. They are often the very
	// slice the reconciler offered and holds too: never modify them.
	tools []spec.TableTool
	// sizes are the bytes each of tools takes in the table (entrySizes).
	sizes []int32
	// ratio is how well tools compress together, measured when a table
	// first needs it (encodedWeight); zero until then.
	ratio float64
	// denied are names among tools denied before the rule runs.
	denied map[string]ownership.Denial
	// restored: the tools were read back from the table, and the ToolSet
	// has not offered since start.
	restored bool
	// offered is the slice of the offer the claim was made from: mostly
	// tools itself, or what tools were copied from.
	offered []spec.TableTool
	// indexed is the claim as the ownership index keeps it: in the claim, so
	// that indexing it costs no allocation of its own.
	indexed ownership.Indexed
}

// toolsOrNil returns the claim's tools; nil for no claim.
func (c *claim) toolsOrNil() []spec.TableTool {
	if c == nil {
		return nil
	}
	return c.tools
}

// repeats reports whether o offers again exactly what made c: the very same
// slice of tools (see [Offer.Tools]), creation time and denials.
func (c *claim) repeats(o Offer) bool {
	return !c.restored && len(c.offered) == len(o.Tools) && len(o.Tools) > 0 && &c.offered[0] == &o.Tools[0] &&
		c.created.Equal(&o.Created) && c.uid == o.UID && maps.Equal(c.denied, o.Denied)
}

// Offer implements [Publisher]. It blocks until the table has been read back
// after start, or ctx is done.
func (p *TablePublisher) Offer(ctx context.Context, o Offer) (map[string]ownership.Verdict, error) {
	if o.ToolSet.Name == "" || o.ToolSet.Namespace == "" {
		return nil, fmt.Errorf("%w: no ToolSet", ErrInvalidOffer)
	}
	if err := p.waitLoaded(ctx); err != nil {
		return nil, err
	}
	// The steady state of every scrape: the same offer as last time. Its
	// names were settled when it was made and at every change since, so
	// there is nothing to record but that the ToolSet spoke.
	p.mu.Lock()
	prev := p.claims[o.ToolSet]
	if prev != nil && prev.repeats(o) {
		p.offered(o.ToolSet)
		verdicts := p.verdicts(o.ToolSet)
		p.mu.Unlock()
		return verdicts, nil
	}
	p.mu.Unlock()

	tools, err := claimedTools(o)
	if err != nil {
		return nil, err
	}
	for name := range o.Denied {
		if _, ok := findTool(tools, name); !ok {
			return nil, fmt.Errorf("%w: %s denies %q, which it does not offer", ErrInvalidOffer, o.ToolSet, name)
		}
	}
	// A claim's tools and sizes are never modified, so prev's may be read
	// without p.mu: an entry it has as it was keeps its size.
	sizes, same := entrySizesSince(prev, tools)
	p.mu.Lock()
	// d stays on the stack unless the offer waits: a copy of it goes to
	// the batch, so an offer decided at once allocates no more than before
	// offers could wait.
	d := deferredOffer{offer: o, tools: tools, sizes: sizes, same: same, prev: prev}
	if p.deferLocked() {
		// Decided with the others that come within the gap.
		waiting := d
		return p.awaitBatch(ctx, o.ToolSet, &waiting)
	}
	defer p.mu.Unlock()
	p.applyOfferLocked(&d)
	// The budget is decided now, not when the table is written: the
	// verdicts returned are those the table will show.
	p.rebudgetLocked()
	setConflictsMetric(p.index.Conflicts())
	return p.verdicts(o.ToolSet), nil
}

// applyOfferLocked makes d's offer the ToolSet's claim, the rule settling
// the names it changed; the budget is the caller's to decide. The old
// object of a ToolSet created again lets go of its names first, in a
// decision of its own, batched or not. p.mu is held.
func (p *TablePublisher) applyOfferLocked(d *deferredOffer) {
	o, tools, sizes, same, prev := d.offer, d.tools, d.sizes, d.same, d.prev
	if c := p.claims[o.ToolSet]; c != nil && c.uid != "" && o.UID != "" && c.uid != o.UID {
		// Deleted and created again under the name: the old object lets go
		// of every name first, a withdraw decided on its own, and the new
		// one claims as any newcomer.
		p.release(o.ToolSet, o.ToolSet)
		p.rebudgetLocked()
	}
	old := p.claims[o.ToolSet]
	if old != prev {
		// Another offer of the ToolSet came between: compare with its.
		same = nil
	}
	c := &claim{created: o.Created, uid: o.UID, tools: tools, sizes: sizes, denied: maps.Clone(o.Denied), offered: o.Tools}
	dirty := false
	p.putClaim(o.ToolSet, c, func(name string, i, j int, moved bool) {
		dirty = dirty || moved
		if dirty || p.ledger.Owner(name) != o.ToolSet {
			return
		}
		// A new entry, or a changed one, of a name this ToolSet owns.
		switch {
		case i < 0 || j < 0:
			dirty = true
		case same != nil:
			dirty = !same[j]
		default:
			dirty = !sameEntry(&old.tools[i], &tools[j])
		}
	})
	p.offered(o.ToolSet)
	if dirty {
		p.kickLocked()
	}
}

// Retain implements [Publisher]. It blocks like Offer.
func (p *TablePublisher) Retain(ctx context.Context, toolSet types.NamespacedName) (map[string]ownership.Verdict, error) {
	if err := p.waitLoaded(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.claims[toolSet]; c != nil && c.restored {
		// What was read back is now what the ToolSet stands by: it is not
		// dropped when the restore window ends.
		c.restored = false
	}
	p.offered(toolSet)
	return p.verdicts(toolSet), nil
}

// Withdraw implements [Publisher]. It blocks until the table has been read
// back after start, or ctx is done.
func (p *TablePublisher) Withdraw(ctx context.Context, toolSet types.NamespacedName) error {
	if err := p.waitLoaded(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	if p.deferLocked() {
		_, err := p.awaitBatch(ctx, toolSet, &deferredOffer{withdraw: true})
		return err
	}
	defer p.mu.Unlock()
	p.offered(toolSet)
	p.release(toolSet, toolSet)
	p.rebudgetLocked()
	setConflictsMetric(p.index.Conflicts())
	return nil
}

// SetPolicies replaces the policies that reserve names for namespaces
// (ToolNamePolicies, their namespace selectors resolved by the caller) and
// settles every name under them at once: an owner a policy now forbids loses
// the name to the earliest-created permitted claimant, and every ToolSet
// whose verdict changed is told through Changed. A malformed policy is
// refused and the policies in force stay. It does not wait for the table to
// be read back: policies set before apply to what is read back.
func (p *TablePublisher) SetPolicies(ctx context.Context, policies []ownership.Policy) error {
	rule, err := ownership.NewRule(policies)
	if err != nil {
		return err
	}
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.policiesSet = true
	changed := p.index.SetRule(rule)
	moved := p.index.Settle()
	p.rebudgetLocked()
	ctrl.LoggerFrom(ctx).Info("Applied the tool name policies", "policies", len(policies), "claimsChanged", changed, "namesMoved", moved)
	setConflictsMetric(p.index.Conflicts())
	return nil
}

// Published returns the entries of the table that toolSet owns, sorted by
// name. Right after start they are the entries read back from the table,
// which lets the ToolSet reconciler hold a ToolSet's last published tools
// through a scrape outage that spans a restart. It blocks like Offer.
// The slice may be the claim's own, shared: never modify it.
func (p *TablePublisher) Published(ctx context.Context, toolSet types.NamespacedName) ([]spec.TableTool, error) {
	if err := p.waitLoaded(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.claims[toolSet]
	if c == nil {
		return nil, nil
	}
	owned := 0
	for _, t := range c.tools {
		if p.ledger.Owner(t.Name) == toolSet {
			owned++
		}
	}
	switch owned {
	case 0:
		return nil, nil
	case len(c.tools):
		// The claim's own tools, which nothing modifies (see claim.tools),
		// clipped so that an append copies: the reconciler keeps them as
		// its baseline, and a copy per ToolSet held the table twice over.
		return slices.Clip(c.tools), nil
	}
	out := make([]spec.TableTool, 0, owned)
	for _, t := range c.tools {
		if p.ledger.Owner(t.Name) == toolSet {
			out = append(out, t)
		}
	}
	return out, nil
}

// restore takes the table read back at start (nil if there was none or it
// was unreadable) as the owners of its names, for the ToolSets that still
// exist (with their creation times), and opens the restore window.
func (p *TablePublisher) restore(ctx context.Context, table *spec.Table, unreadable bool, exists map[types.NamespacedName]toolSetIdentity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	restored := make(map[types.NamespacedName]*claim)
	dropped := 0
	if table != nil {
		for _, t := range table.Tools {
			ts := types.NamespacedName{Namespace: t.ToolSet.Namespace, Name: t.ToolSet.Name}
			id, ok := exists[ts]
			if !ok || (t.ToolSetUID != "" && id.uid != "" && types.UID(t.ToolSetUID) != id.uid) {
				// Gone, or gone and created again: the new object is not the
				// owner the table names, and claims afresh.
				dropped++
				continue
			}
			c := restored[ts]
			if c == nil {
				c = &claim{created: id.created, uid: id.uid, restored: true}
				restored[ts] = c
			}
			c.tools = append(c.tools, t)
		}
	}
	for _, c := range restored {
		// A name twice in a table read back: the last entry stands.
		slices.Reverse(c.tools)
		slices.SortStableFunc(c.tools, compareToolNames)
		c.tools = slices.CompactFunc(c.tools, func(a, b spec.TableTool) bool { return a.Name == b.Name })
		c.sizes = entrySizes(c.tools)
	}
	if table != nil {
		p.inTable = readBack(table, restored)
	}
	// Every ToolSet that exists may claim a name whose owner is gone, or
	// that was claimed first while the old leader had not written it yet:
	// a name without an owner changes hands only once they all have spoken,
	// so that it goes by creation time, not by who is reconciled first.
	p.window.Open(maps.Keys(exists), unreadable)
	// A name under two ToolSets (a table not written by one leader) goes by
	// the rule, not by the order of the entries.
	// The records the table kept, by name, of the entries kept.
	records := map[string]spec.TableRecord{}
	if table != nil && len(table.Records) == len(table.Tools) {
		for i := range table.Tools {
			if table.Records[i].Why != "" {
				records[table.Tools[i].Name] = table.Records[i]
			}
		}
	}
	var read []ownership.RestoredEntry
	ids := make(map[types.NamespacedName]ownership.Identity, len(restored))
	for ts, c := range restored {
		p.putClaim(ts, c, nil)
		ids[ts] = ownership.Identity{Created: c.created.Time, UID: c.uid}
		for _, t := range c.tools {
			e := ownership.RestoredEntry{Name: t.Name, ToolSet: ts, UID: types.UID(t.ToolSetUID)}
			if rec, ok := records[t.Name]; ok {
				e.Since, e.Why = rec.Since, ownership.Why(rec.Why)
			}
			read = append(read, e)
		}
	}
	for name, rec := range ownership.Restore(read, ids, p.clock()) {
		p.index.SetOwner(name, rec)
	}
	// What was read back is what the owners held: the budget decides from
	// it, not from nothing.
	p.index.Restored()
	// An owner that a policy forbids the name loses it now, and one past
	// the budget.
	p.index.Settle()
	p.rebudgetLocked()
	setConflictsMetric(p.index.Conflicts())
	// Write at once what was read back, less the entries of deleted
	// ToolSets; a cluster without a table gets an empty one, so that agents
	// that mount it can start.
	p.kickLocked()
	tools := 0
	if table != nil {
		tools = len(table.Tools)
	}
	ctrl.LoggerFrom(ctx).Info("Read back the tool table", "tools", tools, "toolSets", len(restored), "droppedTools", dropped,
		"awaiting", p.window.Awaiting())
}

// release drops every claim of toolSet and hands its names over; actor is the
// ToolSet whose action caused it (none for a restore that timed out).
func (p *TablePublisher) release(toolSet, actor types.NamespacedName) {
	if !p.index.Release(toolSet, actor) {
		return
	}
	delete(p.claims, toolSet)
	p.drainLocked()
	p.kickLocked()
}

// putClaim makes c the claim of toolSet (none if it has no tools) and has
// the index settle the names it changed, calling changed with each name
// of the claims before and after (see ownership.Index.Offer); nil changed
// settles nothing, as when a table is read back.
func (p *TablePublisher) putClaim(toolSet types.NamespacedName, c *claim, changed func(name string, i, j int, moved bool)) {
	names := make([]string, len(c.tools))
	for i := range c.tools {
		names[i] = c.tools[i].Name
	}
	c.indexed = ownership.Indexed{Created: c.created.Time, UID: c.uid, Names: names, Sizes: c.sizes, Denied: c.denied}
	if len(c.tools) == 0 {
		delete(p.claims, toolSet)
	} else {
		p.claims[toolSet] = c
	}
	// The names stored under this claimant point at the new claim's
	// entries from now on, so that inTable lets go of the slice the claim
	// replaces even when no write follows (the same tools offered again).
	for i := range c.tools {
		t := &c.tools[i]
		if e := p.inTable[t.Name]; e != nil && e != t && storedOwnerOf(e) == storedOwnerOf(t) {
			p.inTable[t.Name] = t
		}
	}
	if changed == nil {
		p.index.Put(toolSet, &c.indexed)
		return
	}
	p.index.Offer(toolSet, &c.indexed, changed)
	p.drainLocked()
}

// drainLocked writes what the index changed: a table to write, ToolSets
// to tell. p.mu is held.
func (p *TablePublisher) drainLocked() {
	told := false
	if p.index.Drain(func(ts types.NamespacedName) { p.pending[ts], told = struct{}{}, true }) {
		p.kickLocked()
	}
	if told {
		p.notifyLocked()
	}
}

// clock returns now, for the ledger's records.
func (p *TablePublisher) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// holds reports whether a name without an owner must wait: during the
// restore window, and until the policies are known if they are awaited.
func (p *TablePublisher) holds() bool {
	return p.restoring() || (p.WaitForPolicies && !p.policiesSet)
}

// restoring reports whether the restore window is open. p.mu is held.
func (p *TablePublisher) restoring() bool { return p.window.Restoring() }

// verdicts returns the rule's verdict on every name toolSet claims.
func (p *TablePublisher) verdicts(toolSet types.NamespacedName) map[string]ownership.Verdict {
	return p.index.Verdicts(toolSet)
}

// offered records that toolSet has spoken since start: its restored entries
// are now replaced by what it offers. The last ToolSet awaited ends the
// restore window.
func (p *TablePublisher) offered(toolSet types.NamespacedName) {
	if c := p.claims[toolSet]; c != nil {
		c.restored = false
	}
	if p.window.Heard(toolSet) {
		p.endRestoreLocked()
	}
}

// pruneAwaiting stops waiting for ToolSets that were deleted before they
// could be reconciled, as the caches show them once synced.
func (p *TablePublisher) pruneAwaiting(ctx context.Context) {
	exists, err := p.listToolSets(ctx)
	if err != nil {
		// The window's bound still ends the wait.
		ctrl.LoggerFrom(ctx).Error(err, "Listing ToolSets after the caches synced failed")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ts := range p.window.Unheard() {
		if _, ok := exists[ts]; !ok {
			p.offered(ts)
		}
	}
}

// endRestore drops the restored entries of ToolSets that did not offer in
// time, and hands over the names that waited.
func (p *TablePublisher) endRestore(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.restoring() {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	unheard := p.window.Unheard()
	for _, ts := range unheard {
		if c := p.claims[ts]; c != nil && c.restored {
			log.Info("Dropped restored tools of a ToolSet that did not offer in time", "toolSet", ts, "tools", len(c.tools))
			p.release(ts, types.NamespacedName{})
		}
	}
	if len(unheard) > 0 {
		log.Info("The restore window ended before every ToolSet was heard from", "awaiting", len(unheard))
	}
	p.window.Close()
	p.endRestoreLocked()
	setConflictsMetric(p.index.Conflicts())
}

// endRestoreLocked hands over the names that waited for the restore
// window, which has just closed. p.mu is held.
func (p *TablePublisher) endRestoreLocked() {
	p.index.Settle()
	p.rebudgetLocked()
	p.kickLocked()
}

func (p *TablePublisher) kickLocked() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *TablePublisher) notifyLocked() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func compareNamespacedName(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// claimedTools returns the tools of an offer as a claim holds them: sorted
// by name, each name once, each entry naming the offering ToolSet. An offer
// that already is so (as the reconciler's are) is kept as it is, not
// copied: the caller must not modify it afterwards.
func claimedTools(o Offer) ([]spec.TableTool, error) {
	ref := spec.ObjectReference{Namespace: o.ToolSet.Namespace, Name: o.ToolSet.Name}
	uid := string(o.UID)
	asIs := true
	for i, t := range o.Tools {
		// The table names the ToolSet that owns each entry; it is not the
		// offerer's to choose.
		if t.ToolSet != ref || t.ToolSetUID != uid || (i > 0 && o.Tools[i-1].Name >= t.Name) {
			asIs = false
			break
		}
	}
	if asIs {
		return o.Tools, nil
	}
	tools := slices.Clone(o.Tools)
	for i := range tools {
		tools[i].ToolSet, tools[i].ToolSetUID = ref, uid
	}
	slices.SortStableFunc(tools, compareToolNames)
	for i := 1; i < len(tools); i++ {
		if tools[i-1].Name == tools[i].Name {
			return nil, fmt.Errorf("%w: %s offers %q twice", ErrInvalidOffer, o.ToolSet, tools[i].Name)
		}
	}
	return tools, nil
}

func compareToolNames(a, b spec.TableTool) int { return strings.Compare(a.Name, b.Name) }

func compareToolName(t spec.TableTool, name string) int { return strings.Compare(t.Name, name) }

// readBack is inTable for the table read back at start, what readers see
// until the first write: the names of an entry kept are Published at once.
// Each entry of a ToolSet kept is its restored claim's (the last of a name
// twice, as there), and that of a ToolSet gone a copy of what inTable
// reads of it (the name and the owner), so that nothing holds the table
// read back, nor the schemas of ToolSets gone until the first write.
func readBack(table *spec.Table, restored map[types.NamespacedName]*claim) map[string]*spec.TableTool {
	out := make(map[string]*spec.TableTool, len(table.Tools))
	for _, t := range table.Tools {
		c := restored[types.NamespacedName{Namespace: t.ToolSet.Namespace, Name: t.ToolSet.Name}]
		if e, ok := findTool(c.toolsOrNil(), t.Name); ok && e.ToolSetUID == t.ToolSetUID {
			out[t.Name] = e
		} else {
			out[t.Name] = &spec.TableTool{Name: t.Name, ToolSet: t.ToolSet, ToolSetUID: t.ToolSetUID}
		}
	}
	return out
}

// findTool finds name in tools, sorted by name.
func findTool(tools []spec.TableTool, name string) (*spec.TableTool, bool) {
	i, ok := slices.BinarySearchFunc(tools, name, compareToolName)
	if !ok {
		return nil, false
	}
	return &tools[i], true
}

func ptrTo[T any](v T) *T { return &v }
