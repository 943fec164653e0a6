package discovery_test

import (
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkReadDir10k measures an agent's reload of the 10,000-tool table
// from its volume, next to decoding the same table from memory.
func BenchmarkReadDir10k(b *testing.B) {
	tools := tabletest.Tools(10_000)
	files, _, _ := encode(b, tools)
	dir := b.TempDir()
	for k, v := range files {
		if err := writeFile(dir, k, v); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("DecodeTable", func(b *testing.B) {
		for b.Loop() {
			if _, err := spec.DecodeTable(files); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadDir", func(b *testing.B) {
		for b.Loop() {
			if _, err := discovery.ReadDir(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkExport1k measures converting a table's schemas for a model, next
// to re-encoding them unchanged.
func BenchmarkExport1k(b *testing.B) {
	tbl := tabletest.Table(1000)
	b.Run("MarshalSchemas", func(b *testing.B) {
		for b.Loop() {
			for _, t := range tbl.Tools {
				if _, err := json.Marshal(t.InputSchema); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("StrictSchema", func(b *testing.B) {
		for b.Loop() {
			for _, t := range tbl.Tools {
				if _, err := discovery.StrictSchema(t.InputSchema); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
