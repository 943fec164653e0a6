package controllers

import (
	"encoding/json"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func sameBytes(a, b []byte) bool { return len(a) > 0 && &a[0] == &b[0] }

// decodeTools decodes tools as a scrape does: every value a copy of its own.
func decodeTools(t *testing.T, doc string) []spec.Tool {
	t.Helper()
	var tools []spec.Tool
	if err := json.Unmarshal([]byte(doc), &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}

const twoToolsAlike = `[
 {"name":"a","title":"T","description":"Looks things up.","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true}},
 {"name":"b","title":"T","description":"Looks things up.","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true}}
]`

func TestSharedValuesShareEqualValues(t *testing.T) {
	s := newSharedValues(maxSharedLen, maxSharedBytes, maxSharedValues)
	first, second := decodeTools(t, twoToolsAlike), decodeTools(t, twoToolsAlike)
	s.share(first)
	s.share(second)
	for i, pair := range [][2]spec.Tool{{first[0], first[1]}, {first[0], second[0]}, {first[1], second[1]}} {
		a, b := pair[0], pair[1]
		if !sameString(a.Title, b.Title) || !sameString(a.Description, b.Description) {
			t.Errorf("pair %d: the text is not shared", i)
		}
		if !sameBytes(a.InputSchema, b.InputSchema) || !sameBytes(a.OutputSchema, b.OutputSchema) {
			t.Errorf("pair %d: the schemas are not shared", i)
		}
		if a.Annotations != b.Annotations {
			t.Errorf("pair %d: the annotations are not shared", i)
		}
	}
	if first[0].Name == first[1].Name {
		t.Fatal("the names were shared across tools")
	}
	// What is shared is what was decoded.
	again := decodeTools(t, twoToolsAlike)
	for i := range again {
		if got, _ := json.Marshal(second[i]); string(got) != string(mustMarshal(t, again[i])) {
			t.Errorf("tool %d changed: %s", i, got)
		}
	}
}

func TestSharedValuesTellValuesApart(t *testing.T) {
	s := newSharedValues(maxSharedLen, maxSharedBytes, maxSharedValues)
	tools := decodeTools(t, `[
 {"name":"a","description":"one","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
 {"name":"b","description":"two","inputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":false}},
 {"name":"c","description":"two","inputSchema":{"type":"object"},"annotations":{"title":"x","readOnlyHint":true}},
 {"name":"d","inputSchema":{"type":"object"}}
]`)
	s.share(tools)
	if tools[0].Description != "one" || tools[1].Description != "two" || tools[2].Description != "two" || tools[3].Description != "" {
		t.Errorf("descriptions mixed up: %q %q %q %q", tools[0].Description, tools[1].Description, tools[2].Description, tools[3].Description)
	}
	if string(tools[1].InputSchema) != `{"type":"object","properties":{}}` || !sameBytes(tools[0].InputSchema, tools[2].InputSchema) {
		t.Errorf("schemas mixed up: %s %s", tools[0].InputSchema, tools[1].InputSchema)
	}
	if a := tools[1].Annotations; a == tools[0].Annotations || *a.ReadOnlyHint {
		t.Error("readOnlyHint false shared with readOnlyHint true")
	}
	if a := tools[2].Annotations; a == tools[0].Annotations || a.Title != "x" {
		t.Error("annotations with a title shared with annotations without")
	}
	if tools[3].Annotations != nil || tools[3].OutputSchema != nil {
		t.Error("absent values became present")
	}
}

// A tenant that serves ever new values only cycles what is kept: the
// copies kept stay within their bounds, and a value longer than the bound
// of one is never kept.
func TestSharedValuesStayWithinBounds(t *testing.T) {
	const maxLen, maxBytes, maxN = 64, 1000, 50
	s := newSharedValues(maxLen, maxBytes, maxN)
	long := strings.Repeat("x", maxLen+1)
	for i := range 2000 {
		v := "description " + strconv.Itoa(i)
		s.share([]spec.Tool{{Name: "t", Description: v, Title: long, InputSchema: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}})
		s.mu.Lock()
		n, bytes := s.kept.len(), s.kept.bytes
		entries := len(s.strs) + len(s.raws) + len(s.annotations)
		_, keptLong := s.strs[maphash.String(s.seed, long)]
		s.mu.Unlock()
		if n > maxN || bytes > maxBytes || entries != n {
			t.Fatalf("after %d values: %d kept (%d in the maps), %d bytes; bounds %d and %d", i+1, n, entries, bytes, maxN, maxBytes)
		}
		if keptLong {
			t.Fatal("a value longer than maxLen was kept")
		}
	}
	if cap(s.kept.items) > 4*maxN {
		t.Errorf("the order grew to %d for %d values", cap(s.kept.items), maxN)
	}
	// The newest are still kept, and shared.
	s.mu.Lock()
	kept, ok := s.strs[maphash.String(s.seed, "description 1999")]
	s.mu.Unlock()
	a := []spec.Tool{{Description: "description 1999"}}
	s.share(a)
	if !ok || !sameString(kept, a[0].Description) {
		t.Error("the newest value is no longer kept")
	}
}

func TestSharedValuesConcurrently(t *testing.T) {
	s := newSharedValues(maxSharedLen, maxSharedBytes, 100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				tools := decodeTools(t, twoToolsAlike)
				tools[0].Description = "d" + strconv.Itoa((g*500+i)%300)
				s.share(tools)
				if tools[1].Description != "Looks things up." || tools[0].Description != "d"+strconv.Itoa((g*500+i)%300) {
					t.Errorf("got %q and %q", tools[0].Description, tools[1].Description)
					return
				}
			}
		})
	}
	wg.Wait()
}
