package controllers

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestLayoutCeilingConverges runs the flush's loop on 60,000 small tools
// (51 MiB of JSON, more than 63 segments lay out) in 100 namespaces: the
// budget under the ceiling that each table too large for its segments
// gives (layoutCeilingAfter), and the encoder. The table must be written
// within a few tries, keeping nearly what the segments held: the ceiling
// is what can be written, not a worst case.
func TestLayoutCeilingConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 51 MiB of JSON a few times")
	}
	yes := true
	var tools []spec.TableTool
	for i := range 6000 {
		ts := spec.ObjectReference{Namespace: fmt.Sprintf("ns-%02d", i%100), Name: fmt.Sprintf("set-%04d", i)}
		for j := range 10 {
			name := fmt.Sprintf("set%04d_tool%02d", i, j)
			tools = append(tools, spec.TableTool{
				Name: name, SourceName: name,
				Description:  fmt.Sprintf("Looks up records of kind %d; returns at most limit matches. ", j) + strings.Repeat(fmt.Sprintf("w%d ", i*10+j), 40),
				InputSchema:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
				Annotations:  &spec.Annotations{ReadOnlyHint: &yes},
				SchemaDigest: "sha256:" + strings.Repeat("0", 64),
				ToolSet:      ts,
				Endpoints:    &spec.Endpoints{Invoke: "http://tools." + ts.Namespace + ".svc:8080/tools/" + name, MCP: "http://tools." + ts.Namespace + ".svc:8080/mcp"},
			})
		}
	}
	sizes := entrySizes(tools)
	entries := make([]ownership.Entry, len(tools))
	t0 := time.Unix(0, 0)
	for i := range tools {
		ref := tools[i].ToolSet
		var n int
		_, _ = fmt.Sscanf(ref.Name, "set-%d", &n)
		entries[i] = ownership.Entry{Name: tools[i].Name, ToolSet: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name},
			Created: t0.Add(time.Duration(n) * time.Second), Bytes: int64(sizes[i]), Kept: true}
	}

	enc := new(spec.TableEncoder)
	var ceiling, first int64
	for tries := 1; ; tries++ {
		b := ownership.Budget{MaxTableBytes: DefaultMaxTableBytes * 2}
		if ceiling > 0 {
			b.MaxTableBytes = ceiling
		}
		denied := b.Apply(entries)
		var kept []*spec.TableTool
		var bytes int64
		for i := range tools {
			if _, ok := denied[tools[i].Name]; !ok {
				kept = append(kept, &tools[i])
				bytes += int64(sizes[i])
			}
		}
		_, err := enc.EncodeTools(kept, "toolplane-tools", spec.TableStored{})
		var le *spec.TableLayoutError
		if errors.As(err, &le) {
			if tries == 4 {
				t.Fatalf("%d tries and the table (%d bytes) still takes %d segments", tries, bytes, le.Segments)
			}
			if first == 0 {
				first = le.Capacity
			}
			ceiling = layoutCeilingAfter(le)
			t.Logf("try %d: %d tools, %d bytes of JSON, %d segments: ceiling %d", tries, len(kept), bytes, le.Segments, ceiling)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			t.Fatalf("%d bytes of JSON laid out at once: the test wants more than the segments hold", bytes)
		}
		t.Logf("try %d: written, %d tools, %d bytes of JSON (%.1f%% of what the first table's segments held)", tries, len(kept), bytes, 100*float64(bytes)/float64(first))
		if bytes < first*95/100 || bytes <= spec.MaxTableSegmentedBytes {
			t.Fatalf("kept %d bytes of JSON, less than 95%% of the %d the segments held, or than the worst case's %d", bytes, first, spec.MaxTableSegmentedBytes)
		}
		return
	}
}
