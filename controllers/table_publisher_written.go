package controllers

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// This file holds what lets status follow the table readers see, not the
// ledger the publisher is about to write: a verdict Owned is Published only
// once the stored table has the name under the ToolSet, and each write
// tells exactly the ToolSets whose names in it changed.

// storedOwner is the ToolSet a stored entry names.
type storedOwner struct {
	toolSet types.NamespacedName
	uid     types.UID
}

// stored records tools as the table readers see, the store having put it in
// the ConfigMaps (or found it there), and tells through Changed every
// ToolSet whose status said some name awaits the write and that now has a
// name more in it: their status is brought up to date without a scrape.
// A name the table no longer has under a ToolSet needs no word: the ledger
// took it from the ToolSet before the write, and that change told it (or
// was its own doing).
//
// The record is updated in place: a write of a table of 50,000 names, one
// of them changed, allocates nothing for it, where a new map per write was
// 5 MB at 5,000 ToolSets, and the old and the new one held at once.
func (p *TablePublisher) stored(tools []*spec.TableTool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// gained are the ToolSets that some name of the write is under now and
	// was not before, with those names.
	var gained map[types.NamespacedName][]string
	for _, e := range tools {
		prev, ok := p.inTable[e.Name]
		if prev == e {
			continue
		}
		o := storedOwnerOf(e)
		// The claim's entry as it is now, under the same owner: the write
		// was taken from the claims before it started, and one replaced
		// since (the same tools offered again, which writes nothing) has
		// let go of the slice the write holds.
		if c := p.claims[o.toolSet]; c != nil {
			if t, found := findTool(c.tools, e.Name); found && storedOwnerOf(t) == o {
				e = t
			}
		}
		if prev == e {
			continue
		}
		// The entry written, even under the same owner: an older one holds
		// a claim's slice that the claim itself has let go.
		p.inTable[e.Name] = e
		if ok && storedOwnerOf(prev) == o {
			continue
		}
		if _, ok := p.unwritten[o.toolSet]; ok {
			if gained == nil {
				gained = map[types.NamespacedName][]string{}
			}
			gained[o.toolSet] = append(gained[o.toolSet], e.Name)
		}
	}
	if len(p.inTable) > len(tools) {
		// Names the write no longer has: every name of tools (a table
		// holds each name once) is in inTable now, so more there than in
		// tools means some must go.
		in := make(map[string]struct{}, len(tools))
		for _, e := range tools {
			in[e.Name] = struct{}{}
		}
		for name := range p.inTable {
			if _, ok := in[name]; !ok {
				delete(p.inTable, name)
			}
		}
	}
	p.tellGainedLocked(gained)
}

// storedOwnerOf is the ToolSet e names.
func storedOwnerOf(e *spec.TableTool) storedOwner {
	return storedOwner{
		toolSet: types.NamespacedName{Namespace: e.ToolSet.Namespace, Name: e.ToolSet.Name},
		uid:     types.UID(e.ToolSetUID),
	}
}

// tellGainedLocked tells through Changed every ToolSet waiting for a write
// (unwritten) that claims one of the names gained lists under it, now in
// the table under it. p.mu is held.
func (p *TablePublisher) tellGainedLocked(gained map[types.NamespacedName][]string) {
	told := false
	for ts := range p.unwritten {
		c := p.claims[ts]
		if c == nil {
			delete(p.unwritten, ts)
			continue
		}
		for _, name := range gained[ts] {
			if _, ok := slices.BinarySearchFunc(c.tools, name, func(t spec.TableTool, name string) int { return strings.Compare(t.Name, name) }); ok {
				p.pending[ts] = struct{}{}
				delete(p.unwritten, ts)
				told = true
				break
			}
		}
	}
	if told {
		p.notifyLocked()
	}
}

// Written implements [Publisher]: the names toolSet claims that the table
// readers see has under it, the object that claims them now. If some name
// it owns is not among them, toolSet is told through Changed once the
// table has it.
func (p *TablePublisher) Written(toolSet types.NamespacedName) map[string]bool {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.claims[toolSet]
	out := make(map[string]bool, len(c.toolsOrNil()))
	for _, t := range c.toolsOrNil() {
		if e, ok := p.inTable[t.Name]; ok && storedOwnerOf(e).toolSet == toolSet && ownership.SameObject(types.UID(e.ToolSetUID), c.uid) {
			out[t.Name] = true
		} else if p.ledger.Owner(t.Name) == toolSet {
			p.unwritten[toolSet] = struct{}{}
		}
	}
	return out
}
