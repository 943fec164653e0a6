package controllers

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// withCompiledSchemas runs the test with an empty compiledSchemas of room
// n, restored afterwards.
func withCompiledSchemas(t testing.TB, n int) *schemaDigests {
	t.Helper()
	saved := compiledSchemas
	compiledSchemas = newSchemaDigests(n)
	t.Cleanup(func() { compiledSchemas = saved })
	return compiledSchemas
}

func TestSchemaDigestsForgetTheOldestFirst(t *testing.T) {
	d := newSchemaDigests(3)
	sum := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i)}) }
	for i := range 3 {
		d.add(sum(i))
	}
	d.add(sum(1)) // already there: nothing is forgotten
	if d.len() != 3 || !d.has(sum(0)) {
		t.Fatalf("adding a digest held already changed the set: len %d, has 0: %v", d.len(), d.has(sum(0)))
	}
	for i := 3; i < 8; i++ {
		d.add(sum(i))
		if d.len() != 3 {
			t.Fatalf("after adding %d the set holds %d digests, want 3", i, d.len())
		}
		for j := range i + 1 {
			if want := j > i-3; d.has(sum(j)) != want {
				t.Fatalf("after adding %d: has(%d) = %v, want %v", i, j, !want, want)
			}
		}
	}
}

func TestValidateSchemaRemembersOnlyWhatCompiled(t *testing.T) {
	seen := withCompiledSchemas(t, 16)
	valid := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	for range 2 {
		if err := validateSchema("inputSchema", valid, 0, true); err != nil {
			t.Fatalf("validateSchema(valid) = %v", err)
		}
	}
	if !seen.has(sha256.Sum256(valid)) || seen.len() != 1 {
		t.Fatalf("a schema that compiled is not remembered once: len %d", seen.len())
	}
	// Remembered or not, a schema past the size limit is refused.
	if err := validateSchema("inputSchema", valid, int32(len(valid)-1), true); err == nil || !strings.Contains(err.Error(), "more than limits.maxSchemaBytes") {
		t.Fatalf("validateSchema(remembered, over the limit) = %v, want the size error", err)
	}
	for _, bad := range []string{
		`{"type":"object","properties":{"q":{"type":7}}}`,
		`{"type":"object","minimum":1e999999}`,
		`{"type":"string"}`,
		`{"type":"object"`,
		`{"type":"object","$ref":"https://example.com/s.json"}`,
	} {
		for i := range 2 {
			err := validateSchema("inputSchema", json.RawMessage(bad), 0, true)
			if err == nil {
				t.Fatalf("validateSchema(%s), call %d = nil, want an error", bad, i+1)
			}
		}
		if seen.has(sha256.Sum256([]byte(bad))) {
			t.Fatalf("a schema that failed is remembered: %s", bad)
		}
	}
	if seen.len() != 1 {
		t.Fatalf("compiledSchemas holds %d digests, want 1", seen.len())
	}
}

// BenchmarkValidateSchema compiles a new schema each time (a schema never
// seen, as at a ToolSet's first round) and one remembered (the next rounds,
// or another ToolSet serving the same tools).
func BenchmarkValidateSchema(b *testing.B) {
	schema := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for, %d."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`, i))
	}
	b.Run("compiled", func(b *testing.B) {
		withCompiledSchemas(b, maxCompiledSchemas)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := validateSchema("inputSchema", schema(i), 0, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		withCompiledSchemas(b, maxCompiledSchemas)
		s := schema(0)
		if err := validateSchema("inputSchema", s, 0, true); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := validateSchema("inputSchema", s, 0, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
