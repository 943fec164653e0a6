package spec_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkTableCeiling finds the largest number of tools the ConfigMap
// table holds: the count past which a first publisher's Encode fails with
// ErrTableTooLarge, to within half a percent. It encodes once per shape,
// whatever b.N; run it with -benchtime=1x. The shapes:
//
//   - synthetic: tabletest's realistic tools (prose descriptions, nested
//     schemas), about 2.4 KB of JSON each;
//   - corpus: the real tool definitions of testdata/corpus-tools.json,
//     repeated under new names, about 1.7 KB each;
//   - incompressible: the synthetic tools with 1 KiB of random text as
//     each description, as a hostile tenant would publish.
//
// The metrics are the ceiling's tools, its JSON and gzip in MiB, and the
// ConfigMaps it takes.
func BenchmarkTableCeiling(b *testing.B) {
	shapes := []struct {
		name  string
		tools func(n int) []spec.TableTool
		max   int
	}{
		{"synthetic", tabletest.Tools, 60_000},
		{"corpus", corpusTools(b), 80_000},
		{"incompressible", incompressibleTools, 30_000},
	}
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			entries, err := spec.MarshalTableEntries(&spec.Table{Tools: s.tools(s.max)})
			if err != nil {
				b.Fatal(err)
			}
			slices.SortFunc(entries, func(x, y spec.TableEntryJSON) int { return strings.Compare(x.Name, y.Name) })
			var last ceilingFit
			for b.Loop() {
				last = tableCeiling(b, entries)
			}
			b.ReportMetric(float64(last.tools), "tools")
			b.ReportMetric(float64(last.json)/(1<<20), "json-MiB")
			b.ReportMetric(float64(last.gzip)/(1<<20), "gzip-MiB")
			b.ReportMetric(float64(last.parts), "configmaps")
			b.ReportMetric(float64(atBudget(entries)), "tools-at-40MiB")
			b.Logf("%s: %d tools fit (%.1f MiB of JSON, %.1f MiB gzipped, %d ConfigMaps); %d do not: %v",
				s.name, last.tools, float64(last.json)/(1<<20), float64(last.gzip)/(1<<20), last.parts, last.refused, last.err)
		})
	}
}

// tableBudget is the JSON bytes the operator publishes at most by
// default: --max-table-bytes of 40 MiB (it may go up to MaxTableBytes;
// what the segments do not lay out is denied besides).
const tableBudget = 40 << 20

// atBudget returns how many of entries fit in tableBudget bytes of JSON.
func atBudget(entries []spec.TableEntryJSON) int {
	n := 0
	for i, e := range entries {
		n += len(e.JSON) + 1
		if n > tableBudget {
			return i
		}
	}
	return len(entries)
}

type ceilingFit struct {
	tools, json, gzip, parts int
	refused                  int
	err                      error
}

// tableCeiling bisects the prefix of entries that still encodes.
func tableCeiling(b *testing.B, entries []spec.TableEntryJSON) ceilingFit {
	try := func(n int) (ceilingFit, error) {
		parts, err := new(spec.TableEncoder).EncodeEntries(entries[:n], "toolplane-tools", spec.TableStored{})
		if err != nil {
			if !errors.Is(err, spec.ErrTableTooLarge) {
				b.Fatal(err)
			}
			return ceilingFit{}, err
		}
		f := ceilingFit{tools: n, parts: len(parts)}
		for _, e := range entries[:n] {
			f.json += len(e.JSON) + 1
		}
		for _, p := range parts {
			for _, c := range p.BinaryData {
				f.gzip += len(c)
			}
		}
		return f, nil
	}
	lo, hi := 1000, len(entries)
	best, err := try(lo)
	if err != nil {
		b.Fatalf("%d tools do not fit: %v", lo, err)
	}
	if _, err := try(hi); err == nil {
		b.Fatalf("all %d tools fit: raise the shape's max", hi)
	}
	var refusal error
	for hi-lo > max(10, lo/200) {
		mid := lo + (hi-lo)/2
		f, err := try(mid)
		if err != nil {
			hi, refusal = mid, err
			continue
		}
		lo, best = mid, f
	}
	if refusal == nil {
		_, refusal = try(hi)
	}
	best.refused, best.err = hi, refusal
	return best
}

// corpusTools returns n tools cut from the real definitions of
// testdata/corpus-tools.json, in turn, each under a name of its own, ten
// to a ToolSet in 200 namespaces.
func corpusTools(b *testing.B) func(n int) []spec.TableTool {
	raw, err := os.ReadFile("testdata/corpus-tools.json")
	if err != nil {
		b.Fatal(err)
	}
	var corpus struct {
		Tools []struct {
			Name         string            `json:"name"`
			Title        string            `json:"title"`
			Description  string            `json:"description"`
			InputSchema  json.RawMessage   `json:"inputSchema"`
			OutputSchema json.RawMessage   `json:"outputSchema"`
			Annotations  *spec.Annotations `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		b.Fatal(err)
	}
	return func(n int) []spec.TableTool {
		tools := make([]spec.TableTool, n)
		for i := range tools {
			c := corpus.Tools[i%len(corpus.Tools)]
			ns := fmt.Sprintf("team-%03d", (i/10)%200)
			set := fmt.Sprintf("tools-%05d", i/10)
			source := fmt.Sprintf("%s_%d", c.Name, i)
			svc := fmt.Sprintf("http://%s.%s.svc:8080", set, ns)
			tools[i] = spec.TableTool{
				Name: set + "_" + source, SourceName: source,
				Title: c.Title, Description: c.Description,
				InputSchema: c.InputSchema, OutputSchema: c.OutputSchema, Annotations: c.Annotations,
				ToolSet:   spec.ObjectReference{Namespace: ns, Name: set},
				Protocol:  spec.ProtocolMCP,
				Endpoints: &spec.Endpoints{MCP: svc + spec.MCPPath},
			}
			if len(tools[i].InputSchema) == 0 {
				tools[i].InputSchema = json.RawMessage(`{"type":"object"}`)
			}
		}
		return tools
	}
}

// incompressibleTools returns tabletest's tools with 1 KiB of random text
// as each description.
func incompressibleTools(n int) []spec.TableTool {
	tools := tabletest.Tools(n)
	r := rand.New(rand.NewPCG(uint64(n), 0xce11))
	buf := make([]byte, 768)
	for i := range tools {
		for j := range buf {
			buf[j] = byte(r.Uint32())
		}
		tools[i].Description = base64.StdEncoding.EncodeToString(buf)
	}
	return tools
}
