package spec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestEncodeEntries checks that a table encoded from its entries' JSON is
// byte-identical to one encoded from its tools, in both forms, from a fresh
// encoder and from one that has the segments cached, with entries in any
// order; and that it reads back with the revision of its tools.
func TestEncodeEntries(t *testing.T) {
	for _, n := range []int{3, 10_000} {
		tools := tabletest.Tools(n)
		entries, err := spec.MarshalTableEntries(&spec.Table{Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		for i := range tools {
			want, _ := json.Marshal(&tools[i])
			if entries[i].Name != tools[i].Name || string(entries[i].JSON) != string(want) {
				t.Fatalf("%d tools: entry %d is %s %s, want json.Marshal of the tool", n, i, entries[i].Name, entries[i].JSON)
			}
		}
		want, err := spec.EncodeTable(&spec.Table{Tools: tools}, "tools")
		if err != nil {
			t.Fatal(err)
		}
		reversed := slices.Clone(entries)
		slices.Reverse(reversed)
		enc := new(spec.TableEncoder)
		for round, es := range [][]spec.TableEntryJSON{entries, entries, reversed} {
			got, err := enc.EncodeEntries(es, "tools", spec.TableStored{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%d tools, round %d: EncodeEntries differs from EncodeTable", n, round)
			}
		}
		if n > 1 && reversed[0].Name != entries[n-1].Name {
			t.Fatalf("%d tools: EncodeEntries sorted the entries it was given", n)
		}
		back, err := spec.DecodeTableParts(want...)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(tools)
		spec.SortTableTools(sorted)
		if back.Revision != spec.TableRevision(sorted) || len(back.Tools) != n {
			t.Fatalf("%d tools: read back revision %s and %d tools, want %s", n, back.Revision, len(back.Tools), spec.TableRevision(sorted))
		}
	}
}

func TestEncodeEntriesErrors(t *testing.T) {
	entries, err := spec.MarshalTableEntries(&spec.Table{Tools: tabletest.Tools(3)})
	if err != nil {
		t.Fatal(err)
	}
	dup := append(slices.Clone(entries), entries[1])
	if _, err := new(spec.TableEncoder).EncodeEntries(dup, "tools", spec.TableStored{}); !errors.Is(err, spec.ErrDuplicateTool) {
		t.Errorf("duplicate entry: %v, want ErrDuplicateTool", err)
	}
	if _, err := new(spec.TableEncoder).EncodeEntries(entries, "", spec.TableStored{}); !errors.Is(err, spec.ErrTableMalformed) {
		t.Errorf("no name: %v, want ErrTableMalformed", err)
	}
	bad := spec.TableTool{Name: "bad", InputSchema: json.RawMessage(`{`)}
	if _, err := spec.MarshalTableEntry(&bad); err == nil {
		t.Error("a tool with invalid schema JSON marshalled")
	}
}

// scaleTools returns the table of make bench-scale at 5,000 ToolSets:
// n tools of 10 per ToolSet, each with a small object schema, endpoints
// and a digest, about 600 bytes of JSON each.
func scaleTools(n int) []spec.TableTool {
	schema := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`)
	yes := true
	tools := make([]spec.TableTool, n)
	for i := range tools {
		ts, j := i/10, i%10
		source := fmt.Sprintf("ts%04d_%02d", ts, j)
		tools[i] = spec.TableTool{
			Name: source, SourceName: source,
			Description:  fmt.Sprintf("Looks up records of kind %d; returns at most limit matches.", j),
			InputSchema:  schema,
			Annotations:  &spec.Annotations{ReadOnlyHint: &yes},
			SchemaDigest: spec.SchemaDigest(schema, nil, &spec.Annotations{ReadOnlyHint: &yes}, nil),
			ToolSet:      spec.ObjectReference{Namespace: fmt.Sprintf("ns-%03d", ts/50), Name: fmt.Sprintf("ts-%04d", ts)},
			ToolSetUID:   fmt.Sprintf("8c5d2a4e-0000-4000-8000-%012d", ts),
			Endpoints: &spec.Endpoints{
				Invoke: fmt.Sprintf("http://svc-%04d.ns-%03d.svc.cluster.local:8080/tools/%s", ts, ts/50, source),
				MCP:    fmt.Sprintf("http://svc-%04d.ns-%03d.svc.cluster.local:8080/mcp", ts, ts/50),
			},
		}
	}
	return tools
}

// BenchmarkTableWrite encodes, as every write of the table does, a table of
// 50,000 tools (make bench-scale at 5,000 ToolSets) after one tool changed,
// with the encoder of the previous write and after the stored index:
// "remarshal" marshals every tool again, as Encode did before it kept each
// tool's JSON (the baseline, in the same run), "cached" is Encode. gc-% is
// the share of the loop's CPU that went to the GC, cpu-ns/op its CPU time
// per write (wall time on a shared machine counts other processes too),
// held-MiB what the encoder holds between writes.
//
//	go test ./spec -run '^$' -bench BenchmarkTableWrite -benchmem -count 6
func BenchmarkTableWrite(b *testing.B) {
	tools := scaleTools(50_000)
	other := slices.Clone(tools)
	other[len(other)/2].Description += " Also archived ones."
	tables := []*spec.Table{{Tools: tools}, {Tools: other}}
	for _, mode := range []string{"remarshal", "cached"} {
		b.Run(mode, func(b *testing.B) {
			enc := new(spec.TableEncoder)
			encode := func(t *spec.Table, stored spec.TableStored) ([]spec.TablePart, error) {
				if mode == "cached" {
					return enc.Encode(t, "toolplane-tools", stored)
				}
				entries, err := spec.MarshalTableEntries(t)
				if err != nil {
					return nil, err
				}
				return enc.EncodeEntries(entries, "toolplane-tools", stored)
			}
			var stored [2]*spec.TableIndex
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i, t := range tables {
				parts, err := encode(t, spec.TableStored{})
				if err != nil {
					b.Fatal(err)
				}
				stored[i] = index(b, parts)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// What the encoder holds between writes, the two indexes aside;
			// reported after the loop, which resets the metrics.
			held := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
			b.ReportAllocs()
			gc, cpu := startGCShare(), startCPU()
			n := 0
			for i := 0; b.Loop(); i++ {
				if _, err := encode(tables[(i+1)%2], spec.TableStored{Index: stored[i%2]}); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(gc(), "gc-%")
			b.ReportMetric(held, "held-MiB")
			b.ReportMetric(float64(cpu())/float64(n), "cpu-ns/op")
		})
	}
}

// startCPU returns a function that reports the CPU time the process used
// since startCPU was called, user and system: on a shared machine, wall
// time also counts the time other processes held the cores.
func startCPU() func() time.Duration {
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	return func() time.Duration { return used() - start }
}

// startGCShare returns a function that reports the share of the CPU the
// process used, in percent, that went to the GC since startGCShare was
// called: GC over GC plus user code, as the runtime estimates them, so
// that other processes on the machine do not count.
func startGCShare() func() float64 {
	samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/user:cpu-seconds"}}
	metrics.Read(samples)
	gc0, user0 := samples[0].Value.Float64(), samples[1].Value.Float64()
	return func() float64 {
		metrics.Read(samples)
		gc, user := samples[0].Value.Float64()-gc0, samples[1].Value.Float64()-user0
		if gc+user <= 0 {
			return 0
		}
		return 100 * gc / (gc + user)
	}
}

// TestEncodeRemarshalsChangedTools changes each field of one tool in turn,
// and each member of its annotations and endpoints, and encodes the table
// with an encoder that holds the JSON of every tool from the write before:
// the parts must be those of a fresh encoder, so that no change to a tool
// is ever published stale. A field added to TableTool fails here until it
// is given a change below (and counts in the encoder's fingerprint).
func TestEncodeRemarshalsChangedTools(t *testing.T) {
	yes, no := true, false
	changes := map[string][]func(*spec.TableTool){
		"Name":         {func(tt *spec.TableTool) { tt.Name += "_renamed" }},
		"SourceName":   {func(tt *spec.TableTool) { tt.SourceName += "x" }},
		"Title":        {func(tt *spec.TableTool) { tt.Title = "A title" }},
		"Description":  {func(tt *spec.TableTool) { tt.Description += " More." }},
		"InputSchema":  {func(tt *spec.TableTool) { tt.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`) }},
		"OutputSchema": {func(tt *spec.TableTool) { tt.OutputSchema = json.RawMessage(`{"type":"object"}`) }},
		"Annotations": {
			func(tt *spec.TableTool) { tt.Annotations = nil },
			func(tt *spec.TableTool) { tt.Annotations = &spec.Annotations{Title: "t", ReadOnlyHint: &yes} },
			func(tt *spec.TableTool) { tt.Annotations = &spec.Annotations{ReadOnlyHint: &no} },
			func(tt *spec.TableTool) { tt.Annotations = &spec.Annotations{ReadOnlyHint: &yes, DestructiveHint: &no} },
			func(tt *spec.TableTool) { tt.Annotations = &spec.Annotations{ReadOnlyHint: &yes, IdempotentHint: &yes} },
			func(tt *spec.TableTool) { tt.Annotations = &spec.Annotations{ReadOnlyHint: &yes, OpenWorldHint: &no} },
		},
		"Meta": {
			func(tt *spec.TableTool) { tt.Meta = map[string]any{"k": "v"} },
			func(tt *spec.TableTool) { tt.Meta = map[string]any{"k": "w"} },
			// More kinds of _meta, in pairs written in a row:
			// TestEncodeTellsMetasApart.
		},
		"Execution": {
			func(tt *spec.TableTool) { tt.Execution = &spec.Execution{} },
			func(tt *spec.TableTool) { tt.Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional} },
			func(tt *spec.TableTool) { tt.Execution = &spec.Execution{TaskSupport: spec.TaskSupportRequired} },
		},
		"SchemaDigest": {func(tt *spec.TableTool) { tt.SchemaDigest = "sha256:00" }},
		"ToolSet": {
			func(tt *spec.TableTool) { tt.ToolSet.Namespace += "x" },
			func(tt *spec.TableTool) { tt.ToolSet.Name += "x" },
		},
		"Protocol": {func(tt *spec.TableTool) { tt.Protocol = spec.ProtocolMCP }},
		"Endpoints": {
			func(tt *spec.TableTool) { tt.Endpoints = nil },
			func(tt *spec.TableTool) {
				tt.Endpoints = &spec.Endpoints{Invoke: tt.Endpoints.Invoke + "x", MCP: tt.Endpoints.MCP}
			},
			func(tt *spec.TableTool) {
				tt.Endpoints = &spec.Endpoints{Invoke: tt.Endpoints.Invoke, MCP: tt.Endpoints.MCP + "x"}
			},
		},
		"CallsPerMinute": {func(tt *spec.TableTool) { tt.CallsPerMinute = 60 }},
		"Extensions": {
			func(tt *spec.TableTool) { tt.Extensions = []string{"example.com/a"} },
			func(tt *spec.TableTool) { tt.Extensions = []string{"example.com/a", "example.com/b"} },
			func(tt *spec.TableTool) { tt.Extensions = []string{"example.com/ab"} },
		},
	}
	fields := reflect.TypeFor[spec.TableTool]()
	for i := range fields.NumField() {
		if fields.Field(i).Tag.Get("json") == "-" {
			continue // Not in the table's JSON: TestTableEntriesCarryNoUID.
		}
		if _, ok := changes[fields.Field(i).Name]; !ok {
			t.Errorf("TableTool.%s has no change here: add one, and hash the field in the encoder's fingerprint", fields.Field(i).Name)
		}
	}
	// Both forms: 30 tools are published plain, 3,000 in gzipped chunks.
	for _, n := range []int{30, 3_000} {
		tools := scaleTools(n)
		// One encoder given the tools in a Table, one given them by
		// reference (EncodeTools), in reverse order.
		enc, refs := new(spec.TableEncoder), new(spec.TableEncoder)
		encode := func(tools []spec.TableTool) {
			t.Helper()
			got, err := enc.Encode(&spec.Table{Tools: tools}, "tools", spec.TableStored{})
			if err != nil {
				t.Fatal(err)
			}
			ptrs := make([]*spec.TableTool, len(tools))
			for i := range tools {
				ptrs[len(tools)-1-i] = &tools[i]
			}
			gotRefs, err := refs.EncodeTools(ptrs, "tools", spec.TableStored{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := spec.EncodeTable(&spec.Table{Tools: tools}, "tools")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				back, _ := spec.DecodeTableParts(got...)
				t.Fatalf("%d tools: the encoder that kept the last write's JSON gives other parts than a fresh one (%d tools read back)", n, len(back.Tools))
			}
			if !reflect.DeepEqual(gotRefs, want) {
				t.Fatalf("%d tools: EncodeTools gives other parts than EncodeTable", n)
			}
		}
		encode(tools)
		// Encodings that fail, in marshalling a tool or in laying out
		// the table, leave nothing stale for the next.
		bad := slices.Clone(tools)
		bad[1].InputSchema = json.RawMessage(`{`)
		dup := append(slices.Clone(tools), tools[0])
		for _, failing := range [][]spec.TableTool{bad, dup, dup, bad} {
			if _, err := enc.Encode(&spec.Table{Tools: failing}, "tools", spec.TableStored{}); err == nil {
				t.Fatalf("%d tools: a table with a bad or duplicate tool encoded", n)
			}
			changed := slices.Clone(tools)
			changed[n/3].Description += " Changed after a failure."
			encode(changed)
			encode(tools)
		}
		for field, fs := range changes {
			for k, change := range fs {
				t.Run(fmt.Sprintf("%d/%s/%d", n, field, k), func(t *testing.T) {
					changed := slices.Clone(tools)
					change(&changed[n/2])
					encode(changed)
					// And back: the tool's JSON from two writes before is
					// not kept, nor used.
					encode(tools)
				})
			}
		}
	}
}

// TestTableEntriesCarryNoUID checks that the owner's UID is not written in
// the table: a table of 3,000 tools, in gzipped chunks, encodes to the
// same parts, of the same revision, whatever their UIDs, and reads back
// with none. The
// ledger's chunks carry it (TestTableLedgerChunksGiveUIDs). Written in
// every entry, it made the bench-scale table of 5,000 ToolSets 24 %
// larger, and every write of it as much.
func TestTableEntriesCarryNoUID(t *testing.T) {
	with := scaleTools(3_000)
	without := slices.Clone(with)
	for i := range without {
		without[i].ToolSetUID = ""
	}
	a, err := spec.EncodeTable(&spec.Table{Tools: with}, "tools")
	if err != nil {
		t.Fatal(err)
	}
	b, err := spec.EncodeTable(&spec.Table{Tools: without}, "tools")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the owners' UIDs changed the table's parts")
	}
	if spec.TableRevision(with) != spec.TableRevision(without) {
		t.Error("the owners' UIDs changed the table's revision")
	}
	back, err := spec.DecodeTableParts(a...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range back.Tools {
		if tt.ToolSetUID != "" {
			t.Fatalf("%s read back with UID %q from the table alone", tt.Name, tt.ToolSetUID)
		}
	}
	raw, err := spec.MarshalTableEntry(&with[0])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(with[0].ToolSetUID)) || bytes.Contains(raw, []byte("toolSetUID")) {
		t.Errorf("an entry's JSON holds its owner's UID: %s", raw)
	}
}

// TestEncodeTellsMetasApart checks the fingerprint of _meta between two
// writes in a row: each pair marshals differently, so the encoder that
// wrote the first must marshal the second again, and give the parts a
// fresh encoder gives.
func TestEncodeTellsMetasApart(t *testing.T) {
	pairs := [][2]map[string]any{
		{{"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 1.0}},
		{{"a": 1.0}, {"a": "1"}},
		{{"a": []any{1.0, 2.0}}, {"a": []any{2.0, 1.0}}},
		{{"a": map[string]any{"b": 1.0, "c": 2.0}}, {"a": map[string]any{"b": 2.0, "c": 1.0}}},
		{{"a": nil}, {"a": false}},
		{{"a": true}, {"a": false}},
		{{"ab": "c"}, {"a": "bc"}},
		{{"a": map[string]string{"b": "c"}}, {"a": map[string]string{"b": "d"}}},
		{{}, {"": ""}},
	}
	for i, p := range pairs {
		tools := scaleTools(30)
		enc := new(spec.TableEncoder)
		for _, meta := range p {
			tools[7].Meta = meta
			got, err := enc.Encode(&spec.Table{Tools: tools}, "tools", spec.TableStored{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := spec.EncodeTable(&spec.Table{Tools: tools}, "tools")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("pair %d: the encoder kept the JSON of _meta %v for %v", i, p[0], meta)
			}
		}
	}
}
