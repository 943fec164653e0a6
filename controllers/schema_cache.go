package controllers

import (
	"crypto/sha256"
	"sync"
)

// maxCompiledSchemas bounds the schemas compiledSchemas remembers: about
// 200 KiB.
const maxCompiledSchemas = 4096

// compiledSchemas is every schema, by the SHA-256 of its bytes, that
// validateSchema found valid lately. What makes a schema valid (its
// numbers, that it is a JSON object of "type": "object", that it
// compiles) depends on its bytes alone, so one seen before, in another
// round of the same ToolSet or in another ToolSet serving the same tools,
// is not compiled again. Compiling was about two fifths of the reconcilers'
// CPU while 5,000 ToolSets converged, and most of its garbage; a workload
// that changes a description, as most changes do, keeps its schemas. A
// schema that fails is not remembered: its error is computed afresh.
var compiledSchemas = newSchemaDigests(maxCompiledSchemas)

// schemaDigests is a set of digests, at most the n it is made with
// (newSchemaDigests), the oldest added forgotten first. It is safe for
// concurrent use.
type schemaDigests struct {
	mu   sync.Mutex
	set  map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte
	next int
}

func newSchemaDigests(n int) *schemaDigests {
	return &schemaDigests{set: make(map[[sha256.Size]byte]struct{}, n), ring: make([][sha256.Size]byte, 0, n)}
}

func (d *schemaDigests) has(sum [sha256.Size]byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.set[sum]
	return ok
}

func (d *schemaDigests) add(sum [sha256.Size]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.set[sum]; ok {
		return
	}
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, sum)
	} else {
		delete(d.set, d.ring[d.next])
		d.ring[d.next] = sum
		d.next = (d.next + 1) % len(d.ring)
	}
	d.set[sum] = struct{}{}
}

func (d *schemaDigests) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.set)
}
