package controllers

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Red-team checks of the compiled-schema cache (8fe674f). They pass: each
// is an attempt to get a schema accepted through the cache that this call
// of validateSchema would refuse.

// TestRedteamSchemaCacheHonoursEachCall: a schema remembered from one call
// is still judged by the size limit and the presence rule of the next, in
// either field; near-identical bytes (whitespace, a trailing value, a
// different number spelling) are judged afresh.
func TestRedteamSchemaCacheHonoursEachCall(t *testing.T) {
	seen := withCompiledSchemas(t, 8)
	valid := json.RawMessage(`{"type":"object","properties":{"n":{"type":"number","maximum":1e300}}}`)
	if err := validateSchema("inputSchema", valid, 0, true); err != nil {
		t.Fatal(err)
	}
	if !seen.has(sha256.Sum256(valid)) {
		t.Fatal("not remembered")
	}
	// A tenant of a smaller limit serves the same bytes.
	for _, field := range []string{"inputSchema", "outputSchema"} {
		if err := validateSchema(field, valid, int32(len(valid)-1), field == "inputSchema"); err == nil || !strings.Contains(err.Error(), "maxSchemaBytes") {
			t.Errorf("%s, remembered, over a smaller limit: %v", field, err)
		}
	}
	for _, raw := range []string{"", "null", "  null  ", " "} {
		if err := validateSchema("inputSchema", json.RawMessage(raw), 0, true); err == nil {
			t.Errorf("inputSchema %q: accepted", raw)
		}
	}
	for _, bad := range []string{
		string(valid) + ` {"type":7}`,                       // a second value after the remembered one
		strings.Replace(string(valid), "1e300", "1e999", 1), // past a float64
		" " + strings.Replace(string(valid), `"object"`, `"string"`, 1),
		strings.Replace(string(valid), `"number"`, `"numbr"`, 1),
	} {
		for i := range 2 {
			if err := validateSchema("outputSchema", json.RawMessage(bad), 0, false); err == nil {
				t.Errorf("call %d: %s accepted", i+1, bad)
			}
		}
	}
}

// TestRedteamSchemaCacheConcurrentEviction: validateSchema from many
// goroutines, over a set of schemas larger than the cache (so it evicts
// all the time), valid and invalid mixed: every answer is the one a fresh
// compile gives, and the race detector sees no race on the set.
func TestRedteamSchemaCacheConcurrentEviction(t *testing.T) {
	withCompiledSchemas(t, 16)
	schema := func(i int) (json.RawMessage, bool) {
		if i%3 == 0 {
			return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"q%d":{"type":7}}}`, i)), false
		}
		return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"q%d":{"type":"string"}}}`, i)), true
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for k := range 400 {
				i := (k*7 + g*13) % 48
				raw, ok := schema(i)
				err := validateSchema("inputSchema", raw, 0, true)
				if (err == nil) != ok {
					errs <- fmt.Errorf("schema %d: %w, want valid %v", i, err, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := compiledSchemas.len(); n > 16 {
		t.Fatalf("the cache holds %d digests, room for 16", n)
	}
}
