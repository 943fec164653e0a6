package controllers

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Bounds of sharedValues: a value longer than maxSharedLen is kept as it
// came, and the copies kept for sharing hold at most maxSharedBytes and
// maxSharedValues in all, the oldest let go first. A value let go stays in
// every tool that holds it; only later documents get copies of their own.
const (
	maxSharedLen    = 16 << 10
	maxSharedBytes  = 4 << 20
	maxSharedValues = 16384
)

// toolValues is the manager's one sharedValues.
var toolValues = newSharedValues(maxSharedLen, maxSharedBytes, maxSharedValues)

// sharedValues keeps one copy of the strings and schemas that the spec
// documents of many ToolSets repeat, so that tools alike hold one copy
// between them. The replicas of one workload, the same server installed in
// many namespaces and the tools of one library serve the same schemas,
// descriptions and annotations; each document decoded its own copy, and
// the reconciler keeps every Pod's last document and the tools it
// assembled from them. The values it hands out are shared: never modify
// them (nothing in the manager modifies a decoded tool's schema or
// annotations). It is safe for concurrent use.
type sharedValues struct {
	mu                     sync.Mutex
	seed                   maphash.Seed
	maxLen, maxBytes, maxN int
	strs                   map[uint64]string
	raws                   map[uint64]json.RawMessage
	annotations            map[annotationsKey]*spec.Annotations
	kept                   keptQueue[sharedKey]
}

// sharedKey names one value kept, for letting it go.
type sharedKey struct {
	hash uint64
	kind uint8 // sharedString, sharedRaw or sharedAnnotations
	ann  annotationsKey
}

const (
	sharedString = iota
	sharedRaw
	sharedAnnotations
)

// annotationsKey is an Annotations by value.
type annotationsKey struct {
	title                          string
	readOnly, destr, idem, openWld int8 // 0 unset, 1 false, 2 true
}

func hint(b *bool) int8 {
	switch {
	case b == nil:
		return 0
	case *b:
		return 2
	default:
		return 1
	}
}

func newSharedValues(maxLen, maxBytes, maxN int) *sharedValues {
	return &sharedValues{
		seed: maphash.MakeSeed(), maxLen: maxLen, maxBytes: maxBytes, maxN: maxN,
		strs: map[uint64]string{}, raws: map[uint64]json.RawMessage{},
		annotations: map[annotationsKey]*spec.Annotations{},
	}
}

// share points each tool's text, schemas and annotations at the copy kept
// of an equal value, keeping the tool's own where none is.
func (s *sharedValues) share(tools []spec.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range tools {
		t := &tools[i]
		t.Title = s.stringLocked(t.Title)
		t.Description = s.stringLocked(t.Description)
		t.InputSchema = s.rawLocked(t.InputSchema)
		t.OutputSchema = s.rawLocked(t.OutputSchema)
		t.Annotations = s.annotationsLocked(t.Annotations)
	}
}

func (s *sharedValues) stringLocked(v string) string {
	if v == "" || len(v) > s.maxLen {
		return v
	}
	h := maphash.String(s.seed, v)
	if kept, ok := s.strs[h]; ok {
		if kept == v {
			return kept
		}
		return v // another value under the hash: not shared
	}
	// A copy of its own size: a decoder may hand out a string inside a
	// larger buffer (the MCP SDK's does for a string with escapes, six
	// bytes of buffer for each \u0041), and what is kept is counted by its
	// length.
	v = strings.Clone(v)
	s.strs[h] = v
	s.keepLocked(sharedKey{hash: h, kind: sharedString}, len(v))
	return v
}

func (s *sharedValues) rawLocked(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || len(v) > s.maxLen {
		return v
	}
	h := maphash.Bytes(s.seed, v)
	if kept, ok := s.raws[h]; ok {
		if string(kept) == string(v) {
			return kept
		}
		return v
	}
	v = bytes.Clone(v) // as for strings: what is kept is what is counted
	s.raws[h] = v
	s.keepLocked(sharedKey{hash: h, kind: sharedRaw}, len(v))
	return v
}

func (s *sharedValues) annotationsLocked(a *spec.Annotations) *spec.Annotations {
	if a == nil || len(a.Title) > s.maxLen {
		return a
	}
	k := annotationsKey{a.Title, hint(a.ReadOnlyHint), hint(a.DestructiveHint), hint(a.IdempotentHint), hint(a.OpenWorldHint)}
	if kept, ok := s.annotations[k]; ok {
		return kept
	}
	kept := &spec.Annotations{Title: strings.Clone(a.Title), ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
		IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	k.title = kept.Title // the key is kept too
	s.annotations[k] = kept
	s.keepLocked(sharedKey{kind: sharedAnnotations, ann: k}, len(a.Title)+64)
	return kept
}

// keepLocked counts k, of size bytes, among the values kept, letting the
// oldest go while the bounds are passed.
func (s *sharedValues) keepLocked(k sharedKey, size int) {
	s.kept.keep(k, size, s.maxN, s.maxBytes, func(old sharedKey) {
		switch old.kind {
		case sharedString:
			delete(s.strs, old.hash)
		case sharedRaw:
			delete(s.raws, old.hash)
		case sharedAnnotations:
			delete(s.annotations, old.ann)
		}
	})
}

// keptQueue is the order in which the values of a bounded memory were
// kept (sharedValues, digestMemo), oldest first, and the bytes they are
// counted: what lets the oldest go while its bounds are passed.
type keptQueue[K any] struct {
	items       []keptItem[K] // oldest first, from head
	head, bytes int
}

type keptItem[K any] struct {
	key  K
	size int
}

// keep counts key, of size bytes, and lets the oldest go, each through
// forget, while more than maxN or maxBytes are kept.
func (q *keptQueue[K]) keep(key K, size, maxN, maxBytes int, forget func(K)) {
	q.items = append(q.items, keptItem[K]{key, size})
	q.bytes += size
	for q.len() > maxN || q.bytes > maxBytes {
		old := q.items[q.head]
		q.items[q.head] = keptItem[K]{}
		q.head++
		q.bytes -= old.size
		forget(old.key)
	}
	if q.head > len(q.items)/2 && q.head > 64 {
		// Reuse the front of the array rather than let it grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:]) // the keys moved may hold strings
		q.items, q.head = q.items[:n], 0
	}
}

// len is how many values are kept.
func (q *keptQueue[K]) len() int { return len(q.items) - q.head }
