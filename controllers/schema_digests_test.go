package controllers

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Every variation of what spec.SchemaDigest reads gets its own digest from
// the memo, the digest spec.SchemaDigest gives, whether it is remembered
// or not, in any order, and from equal values in other buffers.
func TestDigestMemoGivesSchemaDigest(t *testing.T) {
	yes, no := true, false
	base := func() spec.Tool { return spec.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)} }
	variants := []func(*spec.Tool){
		func(*spec.Tool) {},
		func(t *spec.Tool) { t.InputSchema = json.RawMessage(`{"type": "object"}`) }, // canonically equal
		func(t *spec.Tool) { t.InputSchema = json.RawMessage(`{"type":"object","required":["a"]}`) },
		func(t *spec.Tool) { t.InputSchema = nil; t.OutputSchema = json.RawMessage(`{"type":"object"}`) },
		func(t *spec.Tool) { t.OutputSchema = json.RawMessage(`{"type":"object"}`) },
		func(t *spec.Tool) { t.OutputSchema = json.RawMessage(`not json`) },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{} },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{Title: "x"} },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{ReadOnlyHint: &yes} },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{ReadOnlyHint: &no} },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{DestructiveHint: &yes} },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{IdempotentHint: &yes} },
		func(t *spec.Tool) { t.Annotations = &spec.Annotations{OpenWorldHint: &no} },
		func(t *spec.Tool) { t.Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional} },
		func(t *spec.Tool) { t.Execution = &spec.Execution{TaskSupport: spec.TaskSupportForbidden} },
		func(t *spec.Tool) { t.Execution = &spec.Execution{} },
	}
	d := newDigestMemo(maxSharedLen, maxSharedBytes, maxSharedValues)
	for round := range 3 {
		for i, vary := range variants {
			if round == 1 {
				i = len(variants) - 1 - i
				vary = variants[i]
			}
			tool := base()
			vary(&tool)
			// Equal values in buffers of their own.
			tool.InputSchema = clone(tool.InputSchema)
			tool.OutputSchema = clone(tool.OutputSchema)
			want := spec.SchemaDigest(tool.InputSchema, tool.OutputSchema, tool.Annotations, tool.Execution)
			if got := d.of(&tool); got != want {
				t.Errorf("round %d, variant %d: %s, want %s", round, i, got, want)
			}
		}
	}
	d.mu.Lock()
	n := len(d.entries)
	d.mu.Unlock()
	// An empty execution is no execution to the digest and to the memo.
	if n != len(variants)-1 {
		t.Errorf("%d entries for %d variants", n, len(variants)-1)
	}
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}

// What the memo keeps stays within its bounds, however many schemas a
// tenant serves, and schemas longer than the bound are never kept.
func TestDigestMemoStaysWithinBounds(t *testing.T) {
	const maxLen, maxBytes, maxN = 256, 2000, 40
	d := newDigestMemo(maxLen, maxBytes, maxN)
	long := json.RawMessage(`{"description":"` + strings.Repeat("x", maxLen) + `"}`)
	for i := range 3000 {
		in := json.RawMessage(`{"type":"object","description":"` + strconv.Itoa(i) + `"}`)
		if got, want := d.of(&spec.Tool{InputSchema: in}), spec.SchemaDigest(in, nil, nil, nil); got != want {
			t.Fatalf("schema %d: %s, want %s", i, got, want)
		}
		if got, want := d.of(&spec.Tool{InputSchema: long, OutputSchema: in}), spec.SchemaDigest(long, in, nil, nil); got != want {
			t.Fatalf("long schema %d: %s, want %s", i, got, want)
		}
		d.mu.Lock()
		n, bytes, entries := d.kept.len(), d.kept.bytes, len(d.entries)
		d.mu.Unlock()
		if n > maxN || bytes > maxBytes || entries != n {
			t.Fatalf("after %d schemas: %d kept (%d in the map), %d bytes; bounds %d and %d", i+1, n, entries, bytes, maxN, maxBytes)
		}
	}
	if cap(d.kept.items) > 4*maxN {
		t.Errorf("the order grew to %d for %d entries", cap(d.kept.items), maxN)
	}
	// What is counted is the inputs kept and each entry's own cost.
	d.mu.Lock()
	defer d.mu.Unlock()
	sum := 0
	for _, e := range d.entries {
		sum += len(e.in) + len(e.out) + len(e.ann.title) + len(e.task) + digestEntryCost
	}
	if sum != d.kept.bytes {
		t.Errorf("%d bytes counted for %d kept", d.kept.bytes, sum)
	}
}

// Inputs that differ only in where one field ends and the next begins are
// told apart by their hash, so neither takes the other's entry: a field
// may hold any byte a separator could be.
func TestDigestMemoFramesFields(t *testing.T) {
	d := newDigestMemo(maxSharedLen, maxSharedBytes, maxSharedValues)
	pairs := [][2]spec.Tool{
		{{InputSchema: json.RawMessage("a\x00")}, {InputSchema: json.RawMessage("a"), OutputSchema: json.RawMessage("\x00")}},
		{{OutputSchema: json.RawMessage("b\x00")}, {OutputSchema: json.RawMessage("b"), Annotations: &spec.Annotations{Title: "\x00"}}},
		{{Annotations: &spec.Annotations{Title: "c\x00"}}, {Annotations: &spec.Annotations{Title: "c"}, Execution: &spec.Execution{TaskSupport: "\x00"}}},
	}
	for i, p := range pairs {
		for _, tool := range p {
			if got, want := d.of(&tool), spec.SchemaDigest(tool.InputSchema, tool.OutputSchema, tool.Annotations, tool.Execution); got != want {
				t.Errorf("pair %d: %s, want %s", i, got, want)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.entries) != 2*len(pairs) {
		t.Errorf("%d entries for %d inputs", len(d.entries), 2*len(pairs))
	}
}

func TestDigestMemoConcurrently(t *testing.T) {
	d := newDigestMemo(maxSharedLen, maxSharedBytes, 50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 400 {
				in := json.RawMessage(`{"type":"object","description":"` + strconv.Itoa((g*400+i)%120) + `"}`)
				if got, want := d.of(&spec.Tool{InputSchema: in}), spec.SchemaDigest(in, nil, nil, nil); got != want {
					t.Errorf("%s, want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkSchemaDigest takes the digest of a tool alike to one seen
// before, as the assembly of a ToolSet of a workload installed many times
// does: directly, and through the memo.
func BenchmarkSchemaDigest(b *testing.B) {
	tools := decodeTools(&testing.T{}, twoToolsAlike)
	tool := tools[0]
	tool.InputSchema = json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look up."},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"]}`)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = spec.SchemaDigest(tool.InputSchema, tool.OutputSchema, tool.Annotations, tool.Execution)
		}
	})
	b.Run("memo", func(b *testing.B) {
		d := newDigestMemo(maxSharedLen, maxSharedBytes, maxSharedValues)
		b.ReportAllocs()
		for b.Loop() {
			_ = d.of(&tool)
		}
	})
}
