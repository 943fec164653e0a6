package controllers

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Bounds of the manager's digestMemo: inputs of at most maxSharedLen
// together, maxDigestBytes (each entry's inputs and digestEntryCost) and
// maxDigests in all. About 4.5 MiB of heap at most.
const (
	maxDigestBytes = 4 << 20
	maxDigests     = 8192
)

// digestEntryCost is what an entry holds besides its inputs: its map slot,
// its digest and its place in the order, with the allocator's rounding.
const digestEntryCost = 384

// toolDigests is the manager's one digestMemo.
var toolDigests = newDigestMemo(maxSharedLen, maxDigestBytes, maxDigests)

// digestMemo remembers spec.SchemaDigest of the schemas, annotations and
// execution of tools lately assembled. The digest canonicalizes both
// schemas and hashes them, and every round that assembles a ToolSet's
// tools (each new ToolSet, each changed document) took it for each tool:
// 5% of the manager's CPU while 5,000 ToolSets of tools alike converged.
// An entry is found by a hash of what the digest reads and kept only if
// all of it is equal, byte for byte. It keeps copies of what it
// compares: schemas longer than maxLen together are not remembered, and
// the entries hold at most maxBytes (their inputs and digestEntryCost
// each) and maxN entries, the oldest let go first. It is safe for concurrent use.
type digestMemo struct {
	mu                     sync.Mutex
	seed                   maphash.Seed
	maxLen, maxBytes, maxN int
	entries                map[uint64]digestEntry
	kept                   keptQueue[uint64]
}

// digestEntry is what spec.SchemaDigest read, and what it returned.
type digestEntry struct {
	in, out json.RawMessage
	ann     annotationsKey
	hasAnn  bool
	task    string
	digest  string
}

func newDigestMemo(maxLen, maxBytes, maxN int) *digestMemo {
	return &digestMemo{seed: maphash.MakeSeed(), maxLen: maxLen, maxBytes: maxBytes, maxN: maxN,
		entries: map[uint64]digestEntry{}}
}

// of returns spec.SchemaDigest of t's schemas, annotations and execution.
func (d *digestMemo) of(t *spec.Tool) string {
	e := digestEntry{in: t.InputSchema, out: t.OutputSchema, hasAnn: t.Annotations != nil}
	if a := t.Annotations; a != nil {
		e.ann = annotationsKey{a.Title, hint(a.ReadOnlyHint), hint(a.DestructiveHint), hint(a.IdempotentHint), hint(a.OpenWorldHint)}
	}
	if t.Execution != nil {
		e.task = t.Execution.TaskSupport
	}
	size := len(e.in) + len(e.out) + len(e.ann.title) + len(e.task)
	if size > d.maxLen {
		return spec.SchemaDigest(t.InputSchema, t.OutputSchema, t.Annotations, t.Execution)
	}
	var h maphash.Hash
	h.SetSeed(d.seed)
	// Each variable field after its length, so that no two inputs frame
	// alike (a field's bytes may hold any separator).
	var n [8]byte
	for _, b := range [...][]byte{e.in, e.out} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		_, _ = h.Write(n[:])
		_, _ = h.Write(b)
	}
	for _, v := range [...]string{e.ann.title, e.task} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
		_, _ = h.Write(n[:])
		_, _ = h.WriteString(v)
	}
	_, _ = h.Write([]byte{byte(e.ann.readOnly), byte(e.ann.destr), byte(e.ann.idem), byte(e.ann.openWld), boolByte(e.hasAnn)})
	key := h.Sum64()

	d.mu.Lock()
	kept, ok := d.entries[key]
	d.mu.Unlock()
	if ok && kept.same(&e) {
		return kept.digest
	}
	e.digest = spec.SchemaDigest(t.InputSchema, t.OutputSchema, t.Annotations, t.Execution)
	if ok {
		return e.digest // another tool's under the hash: not remembered
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.entries[key]; ok {
		return e.digest // remembered meanwhile
	}
	// Copies of their own size, as sharedValues keeps: what is kept is
	// what is counted, and pins no larger buffer it came in.
	e.in, e.out = bytes.Clone(e.in), bytes.Clone(e.out)
	e.ann.title, e.task = strings.Clone(e.ann.title), strings.Clone(e.task)
	d.entries[key] = e
	d.kept.keep(key, size+digestEntryCost, d.maxN, d.maxBytes, func(old uint64) { delete(d.entries, old) })
	return e.digest
}

// same reports whether e and o hold equal inputs of the digest.
func (e *digestEntry) same(o *digestEntry) bool {
	return string(e.in) == string(o.in) && string(e.out) == string(o.out) &&
		e.ann == o.ann && e.hasAnn == o.hasAnn && e.task == o.task
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
