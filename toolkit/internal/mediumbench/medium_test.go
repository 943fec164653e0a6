package mediumbench

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The synthetic cluster: 10,000 ToolSets of 10 tools in 200 namespaces.
const (
	namespaces  = 200
	toolSets    = 10_000
	perToolSet  = 10
	tools       = toolSets * perToolSet
	churn       = tools / 100
	oneToolRuns = 8
)

// cluster returns the cluster's tools as table entries, sorted by name,
// and the namespace index of each. The tools are tabletest's realistic
// ones, 10,000 of them repeated ten times under new names and ToolSets: a
// repeat is megabytes away from its original, past gzip's window, so it
// compresses as a new tool would.
func cluster(tb testing.TB) ([]spec.TableTool, []int) {
	base := tabletest.Tools(toolSets)
	out := make([]spec.TableTool, 0, tools)
	nsOf := make([]int, 0, tools)
	for i := range tools {
		t := base[i%len(base)]
		set := i / perToolSet
		ns := set % namespaces
		t.ToolSet = spec.ObjectReference{Namespace: fmt.Sprintf("team-%03d", ns), Name: fmt.Sprintf("tools-%05d", set)}
		t.Name = fmt.Sprintf("t%05d_%s", set, t.SourceName)
		svc := fmt.Sprintf("http://%s.%s.svc:8080", t.ToolSet.Name, t.ToolSet.Namespace)
		t.Endpoints = &spec.Endpoints{Invoke: svc + spec.InvokePrefix + t.SourceName, MCP: svc + spec.MCPPath}
		out = append(out, t)
		nsOf = append(nsOf, ns)
	}
	return out, nsOf
}

// cost is what one candidate costs the API server and its readers.
type cost struct {
	// Objects and bytes written (as stored: keys plus values, binary in
	// base64; a ConfigMap update sends the whole object) for one one-tool
	// change, averaged, and for 1 % of the tools changed in one burst.
	writeObjs, writeBytes           float64
	churnObjs, churnBytes           float64
	coldObjs, coldBytes             float64
	watchBytesChange, watchObjsChng float64
}

func report(b *testing.B, c cost) {
	b.ReportMetric(c.writeObjs, "write-objs/change")
	b.ReportMetric(c.writeBytes, "write-B/change")
	b.ReportMetric(c.churnObjs, "write-objs/churn1%")
	b.ReportMetric(c.churnBytes, "write-B/churn1%")
	b.ReportMetric(c.coldObjs, "cold-objs")
	b.ReportMetric(c.coldBytes, "cold-B")
	b.ReportMetric(c.watchBytesChange, "watch-B/change")
	b.ReportMetric(c.watchObjsChng, "watch-objs/change")
}

// BenchmarkMedium models each candidate medium for the tool table over the
// synthetic 100,000-tool cluster, in memory: the objects and bytes a
// publisher writes per one-tool change and per 1 % churn, what a reader
// fetches on a cold start, and what a watching reader receives per change.
// The ConfigMap candidates use toolkit/spec's encoder, so their bytes are
// the real ones. It measures once whatever b.N: run it with -benchtime=1x.
func BenchmarkMedium(b *testing.B) {
	all, nsOf := cluster(b)
	entries, err := spec.MarshalTableEntries(&spec.Table{Tools: all})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	oneTool := make([]int, oneToolRuns)
	for i := range oneTool {
		oneTool[i] = r.IntN(tools)
	}
	burst := r.Perm(tools)[:churn]

	b.Run("single-configmap-table", func(b *testing.B) {
		for b.Loop() {
			_, err := new(spec.TableEncoder).EncodeEntries(entries, "toolplane-tools", spec.TableStored{})
			if !errors.Is(err, spec.ErrTableTooLarge) {
				b.Fatalf("100,000 tools in one table: %v, want ErrTableTooLarge", err)
			}
			b.Logf("one table: %v", err)
		}
	})
	for _, groups := range []int{16, 64} {
		b.Run(fmt.Sprintf("sharded-%d-groups", groups), func(b *testing.B) {
			var c cost
			for b.Loop() {
				c = sharded(b, all, nsOf, groups, oneTool, burst)
			}
			report(b, c)
		})
	}
	b.Run("configmap-per-toolset", func(b *testing.B) {
		var c cost
		for b.Loop() {
			c = perToolSetCost(b, all, oneTool, burst)
		}
		report(b, c)
	})
	b.Run("operator-watch-stream", func(b *testing.B) {
		var c cost
		for b.Loop() {
			c = streamCost(b, entries, oneTool, burst, 0)
		}
		report(b, c)
	})
	b.Run("aggregated-api", func(b *testing.B) {
		var c cost
		for b.Loop() {
			c = streamCost(b, entries, oneTool, burst, objectMetaBytes)
		}
		report(b, c)
	})
}

// changed returns tool i with its description edited, as a workload's new
// version would: n is the edit's number, so that edits differ.
func changed(t spec.TableTool, n int) spec.TableTool {
	t.Description += fmt.Sprintf(" Revised (%d).", n)
	return t
}

// store models the ConfigMaps of the table namespace: name → key → stored
// bytes of that key (key plus value, binary in base64).
type store map[string]map[string]int

func (s store) size(name string) int {
	n := 0
	for _, v := range s[name] {
		n += v
	}
	return n
}

func (s store) total() (objs, bytes int) {
	for name := range s {
		objs++
		bytes += s.size(name)
	}
	return objs, bytes
}

// tally counts writes: objects and whole-object bytes.
type tally struct{ objs, bytes int }

func (t *tally) write(s store, name string) { t.objs++; t.bytes += s.size(name) }

// apply writes the parts of one group's table as the publisher does: the
// new chunks into their part ConfigMaps (each an update of the whole
// object), the base ConfigMap, then, once the grace has passed, the
// removal of the chunks the new index no longer names (an update, or a
// delete of a part left empty).
func apply(tb testing.TB, s store, parts []spec.TablePart, t *tally) *spec.TableIndex {
	for _, p := range parts[1:] {
		cm := s[p.Name]
		if cm == nil {
			cm = map[string]int{}
			s[p.Name] = cm
		}
		added := false
		for k, v := range p.BinaryData {
			if _, ok := cm[k]; !ok {
				cm[k] = len(k) + base64.StdEncoding.EncodedLen(len(v))
				added = true
			}
		}
		if added { // a chunk already stored is not written again
			t.write(s, p.Name)
		}
	}
	base := map[string]int{}
	for k, v := range parts[0].Data {
		base[k] = len(k) + len(v)
	}
	for k, v := range parts[0].BinaryData {
		base[k] = len(k) + base64.StdEncoding.EncodedLen(len(v))
	}
	s[parts[0].Name] = base
	t.write(s, parts[0].Name)

	raw, ok := parts[0].Data[spec.TableIndexKey]
	if !ok {
		return nil // plain: nothing else to clean
	}
	var idx spec.TableIndex
	if err := json.Unmarshal([]byte(raw), &idx); err != nil {
		tb.Fatal(err)
	}
	named := map[string]bool{}
	for _, p := range idx.Parts {
		named[p.ConfigMap+"/"+p.Key] = true
	}
	for name, cm := range s {
		if name == parts[0].Name || !strings.HasPrefix(name, parts[0].Name+"-") {
			continue
		}
		dropped := false
		for k := range cm {
			if !named[name+"/"+k] {
				delete(cm, k)
				dropped = true
			}
		}
		switch {
		case len(cm) == 0:
			delete(s, name)
			t.objs++
		case dropped:
			t.write(s, name)
		}
	}
	return &idx
}

// sharded models the table cut into groups of namespaces, each group a
// ConfigMap table of its own (toolplane-tools-gNN and its parts, written
// by toolkit/spec's encoder), under a root ConfigMap that lists each
// group's base name and revision.
func sharded(b *testing.B, all []spec.TableTool, nsOf []int, groups int, oneTool, burst []int) cost {
	groupOf := func(i int) int { return nsOf[i] % groups }
	members := make([][]int, groups)
	for i := range all {
		members[groupOf(i)] = append(members[groupOf(i)], i)
	}
	cur := slices.Clone(all)
	s := store{}
	encs := make([]*spec.TableEncoder, groups)
	idx := make([]*spec.TableIndex, groups)
	revs := make([]string, groups)
	baseName := func(g int) string { return fmt.Sprintf("toolplane-tools-g%02d", g) }
	encode := func(g int, t *tally) {
		ts := make([]spec.TableTool, len(members[g]))
		for j, i := range members[g] {
			ts[j] = cur[i]
		}
		parts, err := encs[g].Encode(&spec.Table{Tools: ts}, baseName(g), spec.TableStored{Index: idx[g]})
		if err != nil {
			b.Fatalf("group %d of %d tools: %v", g, len(ts), err)
		}
		idx[g] = apply(b, s, parts, t)
		revs[g] = spec.TableRevision(ts)
	}
	writeRoot := func(t *tally) {
		type group struct {
			ConfigMap string `json:"configMap"`
			Revision  string `json:"revision"`
		}
		root := struct {
			SchemaVersion string  `json:"schemaVersion"`
			Groups        []group `json:"groups"`
		}{SchemaVersion: spec.SchemaVersion}
		for g := range groups {
			root.Groups = append(root.Groups, group{baseName(g), revs[g]})
		}
		raw, _ := json.Marshal(root)
		s["toolplane-tools"] = map[string]int{"tools.groups.json": len("tools.groups.json") + len(raw)}
		t.write(s, "toolplane-tools")
	}
	var initial tally
	for g := range groups {
		encs[g] = new(spec.TableEncoder)
		encode(g, &initial)
	}
	writeRoot(&initial)
	var c cost
	objs, bytes := s.total()
	c.coldObjs, c.coldBytes = float64(objs), float64(bytes)

	var one tally
	for n, i := range oneTool {
		cur[i] = changed(cur[i], n)
		encode(groupOf(i), &one)
		writeRoot(&one)
	}
	c.writeObjs, c.writeBytes = float64(one.objs)/float64(len(oneTool)), float64(one.bytes)/float64(len(oneTool))
	// A watching reader receives every object written, whole.
	c.watchObjsChng, c.watchBytesChange = c.writeObjs, c.writeBytes

	var ch tally
	touched := map[int]bool{}
	for n, i := range burst {
		cur[i] = changed(cur[i], 1000+n)
		touched[groupOf(i)] = true
	}
	for g := range groups {
		if touched[g] {
			encode(g, &ch)
		}
	}
	writeRoot(&ch)
	c.churnObjs, c.churnBytes = float64(ch.objs), float64(ch.bytes)
	b.Logf("%d groups of about %d tools: cold %d ConfigMaps, %.1f MiB", groups, tools/groups, objs, float64(bytes)/(1<<20))
	return c
}

// perToolSetCost models one ConfigMap per ToolSet, its tools' table
// gzipped under binaryData, readers listing and watching them by label.
func perToolSetCost(b *testing.B, all []spec.TableTool, oneTool, burst []int) cost {
	cur := slices.Clone(all)
	size := func(set int) int {
		ts := cur[set*perToolSet : (set+1)*perToolSet]
		raw, err := json.Marshal(spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(ts), Tools: ts})
		if err != nil {
			b.Fatal(err)
		}
		return len("tools.json.gz") + base64.StdEncoding.EncodedLen(gzipLen(b, raw))
	}
	var c cost
	for set := range toolSets {
		c.coldBytes += float64(size(set))
	}
	c.coldObjs = toolSets
	// Tools are in ToolSet order: tool i is in ToolSet i/perToolSet.
	for n, i := range oneTool {
		cur[i] = changed(cur[i], n)
		c.writeBytes += float64(size(i / perToolSet))
	}
	c.writeObjs = 1
	c.writeBytes /= float64(len(oneTool))
	c.watchObjsChng, c.watchBytesChange = 1, c.writeBytes
	sets := map[int]bool{}
	for n, i := range burst {
		cur[i] = changed(cur[i], 1000+n)
		sets[i/perToolSet] = true
	}
	for set := range sets {
		c.churnBytes += float64(size(set))
	}
	c.churnObjs = float64(len(sets))
	return c
}

// objectMetaBytes is the JSON a Tool object of an aggregated API adds to
// its entry: apiVersion, kind and metadata (name, namespace, uid,
// resourceVersion, creationTimestamp, one label), as a watch event or a
// list item carries it. A modelled figure, not a measured one.
const objectMetaBytes = 330

// streamCost models readers that list and watch the tools from the
// operator, directly (a snapshot gzipped whole, then one event per changed
// tool) or through an aggregated API (a list of Tool objects, each with
// its metadata, uncompressed, then one watch event per changed tool). The
// API server stores nothing of the table.
func streamCost(b *testing.B, entries []spec.TableEntryJSON, oneTool, burst []int, meta int) cost {
	const envelope = len(`{"type":"MODIFIED","revision":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","object":}`)
	event := func(i int) float64 { return float64(len(entries[i].JSON) + len(" Revised (0).") + envelope + meta) }
	var c cost
	c.coldObjs = 1
	if meta == 0 {
		zw, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		var n countWriter
		zw.Reset(&n)
		for _, e := range entries {
			_, _ = zw.Write(e.JSON)
			_, _ = zw.Write([]byte{','})
		}
		_ = zw.Close()
		c.coldBytes = float64(n)
	} else {
		for _, e := range entries {
			c.coldBytes += float64(len(e.JSON) + meta + 1)
		}
		c.coldObjs = float64((len(entries) + 499) / 500) // list pages of 500
	}
	for _, i := range oneTool {
		c.watchBytesChange += event(i)
	}
	c.watchBytesChange /= float64(len(oneTool))
	c.watchObjsChng = 1
	return c
}

type countWriter int

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }

func gzipLen(tb testing.TB, raw []byte) int {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if _, err := io.Copy(zw, bytes.NewReader(raw)); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Len()
}
