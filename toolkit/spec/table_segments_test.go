package spec_test

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// index returns the index of an encoded indexed table.
func index(t testing.TB, parts []spec.TablePart) *spec.TableIndex {
	t.Helper()
	idx, err := spec.ParseTableIndex([]byte(parts[0].Data[spec.TableIndexKey]))
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// gunzipMembers decompresses each chunk the index names on its own.
func gunzipMembers(t testing.TB, parts []spec.TablePart) [][]byte {
	t.Helper()
	f := files(t, parts)
	var out [][]byte
	for _, p := range index(t, parts).Parts {
		zr, err := gzip.NewReader(bytes.NewReader(f[p.Key]))
		if err != nil {
			t.Fatalf("chunk %s in %s is not gzip on its own: %v", p.Key, p.ConfigMap, err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("chunk %s in %s: %v", p.Key, p.ConfigMap, err)
		}
		out = append(out, b)
	}
	return out
}

// checkParts checks what every encoded table must satisfy: each ConfigMap
// within MaxTablePartBytes, each chunk small enough that two fit in one, at
// most MaxTableParts chunks, every chunk an independent gzip member, and the
// members' contents concatenating to the canonical JSON, which DecodeTable
// reads back.
func checkParts(t testing.TB, parts []spec.TablePart, tools []spec.TableTool) {
	t.Helper()
	for i, p := range parts {
		if s := p.StoredSize(); s > spec.MaxTablePartBytes {
			t.Fatalf("part %s stores %d bytes, over %d", p.Name, s, spec.MaxTablePartBytes)
		}
		if i > 0 && (len(p.BinaryData) == 0 || len(p.Data) != 0) {
			t.Fatalf("part %s holds %d chunks and %d data keys, want only chunks", p.Name, len(p.BinaryData), len(p.Data))
		}
		for k, v := range p.BinaryData {
			if s := (spec.TablePart{BinaryData: map[string][]byte{k: v}}).StoredSize(); i > 0 && 2*s > spec.MaxTablePartBytes {
				t.Fatalf("chunk %s of part %s stores %d bytes: two do not fit in one ConfigMap", k, p.Name, s)
			}
		}
	}
	sorted := slices.Clone(tools)
	spec.SortTableTools(sorted)
	want := mustJSON(t, spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(sorted), Tools: sorted})
	if _, ok := parts[0].Data[spec.TableKey]; !ok {
		idx := index(t, parts)
		if len(idx.Parts) > spec.MaxTableParts {
			t.Fatalf("%d chunks, at most %d", len(idx.Parts), spec.MaxTableParts)
		}
		if got := bytes.Join(gunzipMembers(t, parts), nil); !bytes.Equal(got, want) {
			t.Fatalf("the chunks' contents differ from the table's JSON:\n got %.300s\nwant %.300s", got, want)
		}
		if idx.Size != int64(len(want)) {
			t.Fatalf("index size %d, JSON is %d bytes", idx.Size, len(want))
		}
	}
	got, err := spec.DecodeTable(files(t, parts))
	if err != nil {
		t.Fatal(err)
	}
	if g := mustJSON(t, got); !bytes.Equal(g, want) {
		t.Fatalf("decoded table differs:\n got %.300s\nwant %.300s", g, want)
	}
}

// TestTableToolsJoinedAsArray checks what the segments rely on: the JSON of
// a slice of tools is the JSON of each, joined by commas in brackets.
func TestTableToolsJoinedAsArray(t *testing.T) {
	tools := append(tabletest.Tools(50), fuzzTable().Tools...)
	tools = append(tools, spec.TableTool{
		Name: "html<&>\u2028", Description: "<script>&amp; \u2029 \x01 é 😀", InputSchema: json.RawMessage(`{"type":"object","description":"<b>&</b>"}`),
		Meta: map[string]any{"z": 1.5e300, "a": []any{nil, true, "<"}},
	})
	each := make([][]byte, len(tools))
	for i := range tools {
		each[i] = mustJSON(t, &tools[i])
	}
	joined := append(append([]byte{'['}, bytes.Join(each, []byte{','})...), ']')
	if whole := mustJSON(t, tools); !bytes.Equal(whole, joined) {
		t.Fatalf("json.Marshal of the slice differs from its elements joined:\n got %.300s\nwant %.300s", whole, joined)
	}
}

// TestEncodeTableSegments checks the split form: chunk 0 holds the head
// alone, every other chunk is one gzip member of whole tools, and readers
// that gunzip the concatenation, as every reader does, read the table.
func TestEncodeTableSegments(t *testing.T) {
	tools := tabletest.Tools(1000)
	parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "t", 4<<10, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	checkParts(t, parts, tools)
	members := gunzipMembers(t, parts)
	if len(members) < 5 {
		t.Fatalf("%d chunks; the test wants at least 5", len(members))
	}
	if !bytes.HasPrefix(members[0], []byte(`{"schemaVersion":`)) || !bytes.HasSuffix(members[0], []byte(`"tools":[`)) {
		t.Errorf("chunk 0 holds %.200q, want the head alone", members[0])
	}
	for i, m := range members[1:] {
		if i > 0 && m[0] != ',' {
			t.Errorf("chunk %d starts with %q, want a comma and a whole tool", i+1, m[:10])
		}
		if !bytes.HasSuffix(m, []byte("}")) {
			t.Errorf("chunk %d ends with %q, want a whole tool", i+1, m[len(m)-10:])
		}
	}

	// A table that fits next to the index stays one chunk, its members
	// concatenated: one ConfigMap as before.
	small, err := spec.EncodeTableChunked(&spec.Table{Tools: tools[:30]}, "t", 4<<10, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 1 || len(index(t, small).Parts) != 1 {
		t.Fatalf("a table that fits one chunk took %d ConfigMaps", len(small))
	}
	checkParts(t, small, tools[:30])
}

// changed returns the chunks of after that before does not have (chunk 0
// aside) and the part ConfigMaps that after writes: those whose chunk is
// new.
func changed(t testing.TB, before, after []spec.TablePart) (chunks int, configMaps []string) {
	t.Helper()
	old := map[string]bool{}
	for _, p := range index(t, before).Parts[1:] {
		old[p.Key] = true
	}
	for _, p := range index(t, after).Parts[1:] {
		if !old[p.Key] {
			chunks++
			configMaps = append(configMaps, p.ConfigMap)
		}
	}
	return chunks, configMaps
}

// TestEncodeTableChangeIsLocal changes, adds and removes single tools of a
// 10 MiB table of realistic tools: each change must give at most two new
// chunks besides chunk 0, written to at most two part ConfigMaps.
func TestEncodeTableChangeIsLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes a 10 MiB table dozens of times")
	}
	tools := tabletest.Tools(4200)
	enc := new(spec.TableEncoder)
	base, err := enc.Encode(&spec.Table{Tools: tools}, "toolplane-tools", spec.TableStored{})
	if err != nil {
		t.Fatal(err)
	}
	checkParts(t, base, tools)
	idx := index(t, base)
	if idx.Size < 10<<20 {
		t.Fatalf("the table is %d bytes of JSON; the test wants 10 MiB", idx.Size)
	}
	t.Logf("%d tools, %d bytes of JSON: %d chunks", len(tools), idx.Size, len(idx.Parts))

	type change struct {
		name  string
		tools []spec.TableTool
	}
	var changes []change
	for k := 0; k < len(tools); k += 525 {
		desc := slices.Clone(tools)
		desc[k].Description += " Now also matches archived records."
		changes = append(changes, change{fmt.Sprintf("description of %d", k), desc})
		schema := slices.Clone(tools)
		schema[k].InputSchema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":64}},"required":["q"]}`)
		changes = append(changes, change{fmt.Sprintf("schema of %d", k), schema})
		added := append(slices.Clone(tools), tools[k])
		added[len(added)-1].Name += "_v2"
		changes = append(changes, change{fmt.Sprintf("add after %d", k), added})
		changes = append(changes, change{fmt.Sprintf("remove %d", k), slices.Delete(slices.Clone(tools), k, k+1)})
	}
	hist := map[int]int{}
	for _, c := range changes {
		after, err := enc.Encode(&spec.Table{Tools: c.tools}, "toolplane-tools", spec.TableStored{Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		n, cms := changed(t, base, after)
		hist[n]++
		if n > 2 || len(cms) > 2 {
			t.Errorf("%s: %d new chunks, in ConfigMaps %v; want at most 2", c.name, n, cms)
		}
		if n == 0 {
			t.Errorf("%s: no chunk changed", c.name)
		}
		// Unchanged chunks stay where they are.
		where := map[string]string{}
		for _, p := range idx.Parts {
			where[p.Key] = p.ConfigMap
		}
		for _, p := range index(t, after).Parts {
			if cm, ok := where[p.Key]; ok && cm != p.ConfigMap {
				t.Errorf("%s: chunk %s moved from %s to %s", c.name, p.Key, cm, p.ConfigMap)
			}
		}
		if len(changes) < 8 || c.name == changes[0].name {
			checkParts(t, after, c.tools)
		}
	}
	t.Logf("new chunks per change: %v over %d changes", hist, len(changes))
}

// TestTableEncoderCache checks that an encoder's cache changes nothing: the
// same tools after other tables give the parts a fresh encoder gives.
func TestTableEncoderCache(t *testing.T) {
	tools := tabletest.Tools(600)
	enc := spec.NewTableEncoderChunked(4<<10, 16<<10)
	first, err := enc.Encode(&spec.Table{Tools: tools}, "t", spec.TableStored{})
	if err != nil {
		t.Fatal(err)
	}
	prev := index(t, first)
	other := slices.Clone(tools)
	other[100].Description = "Changed."
	if _, err := enc.Encode(&spec.Table{Tools: other}, "t", spec.TableStored{Index: prev}); err != nil {
		t.Fatal(err)
	}
	again, err := enc.Encode(&spec.Table{Tools: tools}, "t", spec.TableStored{Index: prev})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := spec.NewTableEncoderChunked(4<<10, 16<<10).Encode(&spec.Table{Tools: slices.Clone(tools)}, "t", spec.TableStored{Index: prev})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustJSON(t, again), mustJSON(t, fresh)) || !bytes.Equal(mustJSON(t, again), mustJSON(t, first)) {
		t.Fatal("an encoder with a cache gave other parts than a fresh one")
	}
}

// TestEncodeTablePlacement checks where chunks go given the stored index:
// kept chunks stay, a new chunk takes the ConfigMap of a chunk the index no
// longer names, and otherwise the lowest free number, leaving holes as they
// are.
func TestEncodeTablePlacement(t *testing.T) {
	enc := func(tools []spec.TableTool, prev *spec.TableIndex) []spec.TablePart {
		t.Helper()
		parts, err := spec.NewTableEncoderChunked(4<<10, 16<<10).Encode(&spec.Table{Tools: tools}, "t", spec.TableStored{Index: prev})
		if err != nil {
			t.Fatal(err)
		}
		checkParts(t, parts, tools)
		return parts
	}
	where := func(parts []spec.TablePart) map[string]string {
		out := map[string]string{}
		for _, p := range index(t, parts).Parts {
			out[p.Key] = p.ConfigMap
		}
		return out
	}
	tools := tabletest.Tools(1000)
	v1 := enc(tools, nil)
	idx1 := index(t, v1)
	w1 := map[string]bool{}
	for _, p := range idx1.Parts {
		w1[p.ConfigMap] = true
	}
	n := len(idx1.Parts)
	if n < 6 {
		t.Fatalf("%d chunks; the test wants at least 6", n)
	}
	// A first table fills parts from t-1 on, without holes.
	cms1 := len(v1) - 1
	for _, p := range idx1.Parts[1:] {
		var k int
		if _, err := fmt.Sscanf(p.ConfigMap, "t-%d", &k); err != nil || k < 1 || k > cms1 {
			t.Fatalf("a first table of %d part ConfigMaps puts a chunk in %s", cms1, p.ConfigMap)
		}
	}
	if cms1 >= n-1 {
		t.Errorf("%d chunks in %d part ConfigMaps: small chunks are not packed", n-1, cms1)
	}
	if again := enc(tools, idx1); !bytes.Equal(mustJSON(t, again), mustJSON(t, v1)) {
		t.Error("the same tools after their own index gave other parts")
	}

	// Replace the tools of a middle chunk: the new one goes to the lowest
	// empty part.
	mid := idx1.Parts[n/2]
	members := gunzipMembers(t, v1)
	names := map[string]bool{}
	var all []spec.TableTool
	if err := json.Unmarshal(bytes.Join(members, nil), &struct {
		Tools *[]spec.TableTool `json:"tools"`
	}{&all}); err != nil {
		t.Fatal(err)
	}
	for _, tool := range all {
		if bytes.Contains(members[n/2], []byte(`"name":"`+tool.Name+`"`)) {
			names[tool.Name] = true
		}
	}
	v2tools := slices.Clone(tools)
	for i := range v2tools {
		if names[v2tools[i].Name] {
			v2tools[i].Description = "Replaced."
		}
	}
	v2 := enc(v2tools, idx1)
	// The new chunk goes where the one it replaces was, next to the
	// others there, or to the lowest empty part if it was alone.
	want := mid.ConfigMap
	if slices.IndexFunc(idx1.Parts, func(p spec.TableIndexPart) bool { return p.ConfigMap == mid.ConfigMap && p.Key != mid.Key }) < 0 {
		want = spec.TablePartName("t", cms1+1)
	}
	if chunks, cms := changed(t, v1, v2); chunks != 1 || cms[0] != want {
		t.Fatalf("changing the tools of chunk %d (in %s) wrote %d chunks to %v, want one to %s", n/2, mid.ConfigMap, chunks, cms, want)
	}
	// Chunks in their grace count: the new chunk goes to a part with room
	// for it, counting them, and if none has, to the one that holds the
	// fewest bytes the index names, to wait there.
	chunkSize := len(mid.Key) + base64.StdEncoding.EncodedLen(mid.Size)
	namedIn := func(cm string) int {
		n := 0
		for _, p := range idx1.Parts[1:] {
			if p.ConfigMap == cm {
				n += len(p.Key) + base64.StdEncoding.EncodedLen(p.Size)
			}
		}
		return n
	}
	for _, tc := range []struct {
		name  string
		grace func(string) int
		room  bool
	}{
		{"the part of the old chunk full", func(cm string) int {
			if cm == mid.ConfigMap || cm == spec.TablePartName("t", cms1+1) {
				return spec.MaxTablePartBytes - namedIn(cm) - 10
			}
			return 0
		}, true},
		{"every part but the last full", func(cm string) int {
			if cm == spec.TablePartName("t", spec.MaxTableParts-1) {
				return 0
			}
			return spec.MaxTablePartBytes - namedIn(cm) - 10
		}, true},
		{"every part full", func(cm string) int { return spec.MaxTablePartBytes - namedIn(cm) - chunkSize/4 }, false},
	} {
		parts, err := spec.NewTableEncoderChunked(4<<10, 16<<10).Encode(&spec.Table{Tools: v2tools}, "t", spec.TableStored{Index: idx1, Grace: tc.grace})
		if err != nil {
			t.Fatal(err)
		}
		checkParts(t, parts, v2tools)
		_, cms := changed(t, v1, parts)
		if len(cms) != 1 {
			t.Fatalf("%s: new chunks in %v, want one", tc.name, cms)
		}
		roomy := tc.grace(cms[0])+namedIn(cms[0])+chunkSize <= spec.MaxTablePartBytes
		if roomy != tc.room {
			t.Errorf("%s: the new chunk went to %s, which has room: %v", tc.name, cms[0], roomy)
		}
		if !tc.room && namedIn(cms[0]) > 0 {
			t.Errorf("%s: the new chunk went to %s, next to indexed chunks, while parts held none", tc.name, cms[0])
		}
	}

	// Remove the tools of that chunk and the next: one ConfigMap is left
	// without a chunk, a hole in the numbering; a new table grows into it.
	var gone []spec.TableTool
	for _, tool := range tools {
		if !names[tool.Name] {
			gone = append(gone, tool)
		}
	}
	v3 := enc(gone, idx1)
	w3 := where(v3)
	used := map[string]bool{}
	for _, cm := range w3 {
		used[cm] = true
	}
	var holes []string
	for i := 1; i < n; i++ {
		if !used[spec.TablePartName("t", i)] {
			holes = append(holes, spec.TablePartName("t", i))
		}
	}
	if len(holes) == 0 {
		t.Fatalf("removing the tools of a chunk left no ConfigMap free: %v", w3)
	}
	for k, cm := range where(v1) {
		if got, ok := w3[k]; ok && got != cm {
			t.Errorf("chunk %s moved from %s to %s", k, cm, got)
		}
	}
	bigger := append(slices.Clone(gone), tabletest.Tools(1300)[1000:]...)
	for i := range bigger[len(gone):] {
		bigger[len(gone)+i].Name = "zz_" + bigger[len(gone)+i].Name
	}
	v4 := enc(bigger, index(t, v3))
	w4 := where(v4)
	filled := map[string]bool{}
	for _, cm := range w4 {
		filled[cm] = true
	}
	for _, h := range holes {
		if !filled[h] {
			t.Errorf("a new chunk went elsewhere while %s was free: %v", h, w4)
		}
	}

	// A stored index of numbered chunks keeps none: every chunk is new,
	// and goes to an empty part.
	legacy := *idx1
	legacy.Parts = slices.Clone(idx1.Parts)
	for i := range legacy.Parts {
		legacy.Parts[i].Key = spec.TablePartKey(i)
	}
	w5 := where(enc(tools, &legacy))
	used5 := map[string]bool{}
	for _, cm := range w5 {
		used5[cm] = true
	}
	for k := n; k < spec.MaxTableParts; k++ {
		if !used5[spec.TablePartName("t", k)] {
			t.Errorf("after an index of numbered chunks, %s was left empty: %v", spec.TablePartName("t", k), w5)
		}
	}
	// Names that are not the table's parts are ignored.
	hostile := *idx1
	hostile.Parts = slices.Clone(idx1.Parts)
	hostile.Parts[1].ConfigMap = "kube-root-ca.crt"
	hostile.Parts[2].ConfigMap = "t-01"
	hostile.Parts[3].ConfigMap = spec.TablePartName("t", spec.MaxTableParts)
	for _, p := range index(t, enc(tools, &hostile)).Parts[1:] {
		if !strings.HasPrefix(p.ConfigMap, "t-") || p.ConfigMap == "t-01" || p.ConfigMap == spec.TablePartName("t", spec.MaxTableParts) {
			t.Errorf("chunk placed in %s", p.ConfigMap)
		}
	}
}

// TestEncodeTableHostile encodes tools that do not compress: a single tool
// near or past a chunk's capacity is cut in bytes, and no part is ever
// oversize; past MaxTableParts the table is refused.
func TestEncodeTableHostile(t *testing.T) {
	noise := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	tool := func(name string, desc string) spec.TableTool {
		return spec.TableTool{Name: name, SourceName: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	for _, size := range []int{140 << 10, 188 << 10, 200 << 10, 2 << 20} {
		t.Run(fmt.Sprintf("one tool of %d KiB", size>>10), func(t *testing.T) {
			tools := append(tabletest.Tools(300), tool("m_giant", noise(size*3/4)))
			parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "t")
			if err != nil {
				t.Fatal(err)
			}
			checkParts(t, parts, tools)
		})
	}
	t.Run("many tools that do not compress", func(t *testing.T) {
		var tools []spec.TableTool
		for i := range 400 {
			tools = append(tools, tool(fmt.Sprintf("n%04d", i), noise(1<<10)))
		}
		parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "t", 4<<10, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		checkParts(t, parts, tools)
		for i := range 1200 {
			tools = append(tools, tool(fmt.Sprintf("o%04d", i), noise(1<<10)))
		}
		if _, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "t", 4<<10, 16<<10); !errors.Is(err, spec.ErrTableTooLarge) {
			t.Fatalf("2 MiB that do not compress in chunks of 16 KiB: err = %v, want ErrTableTooLarge", err)
		}
	})
}

// TestEncodeTableCapacity encodes MaxTableBytes/2 of realistic tools (32 MiB,
// within the default --max-table-bytes of 40 MiB): it must fit in MaxTableParts.
func TestEncodeTableCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 32 MiB of JSON")
	}
	tools := tabletest.Tools(13_600)
	parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
	if err != nil {
		t.Fatal(err)
	}
	idx := index(t, parts)
	if idx.Size < spec.MaxTableBytes/2 {
		t.Fatalf("%d bytes of JSON; the test wants %d", idx.Size, spec.MaxTableBytes/2)
	}
	checkParts(t, parts, tools)
	t.Logf("%d tools, %d bytes of JSON: %d chunks of at most %d", len(tools), idx.Size, len(idx.Parts), spec.MaxTableParts)
}

// TestEncodeTableCompressible encodes 50,000 small tools that compress
// about 20:1, as 5,000 ToolSets of ten give: their chunks are small, and
// parts hold several, so that the part ConfigMaps follow the compressed
// size, not the number of segments.
func TestEncodeTableCompressible(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 20 MB of JSON")
	}
	yes := true
	var tools []spec.TableTool
	for i := range 5000 {
		ns := fmt.Sprintf("bench-%04d", i)
		for j := range 10 {
			name := fmt.Sprintf("set%04d_tool%02d", i, j)
			tools = append(tools, spec.TableTool{
				Name: name, SourceName: name,
				Description:  fmt.Sprintf("Looks up records of kind %d; returns at most limit matches.", j),
				InputSchema:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
				Annotations:  &spec.Annotations{ReadOnlyHint: &yes},
				SchemaDigest: "sha256:" + strings.Repeat("0", 64),
				ToolSet:      spec.ObjectReference{Namespace: ns, Name: "tools"},
				Endpoints:    &spec.Endpoints{Invoke: "http://tools." + ns + ".svc:8080/tools/" + name, MCP: "http://tools." + ns + ".svc:8080/mcp"},
			})
		}
	}
	parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
	if err != nil {
		t.Fatal(err)
	}
	checkParts(t, parts, tools)
	idx := index(t, parts)
	stored := 0
	for _, p := range parts[1:] {
		stored += p.StoredSize()
	}
	// Half of each part is left for replacements; packing loses at most
	// a chunk per part.
	if most := 2*(2*stored/spec.MaxTablePartBytes+1) + 1; len(parts)-1 > most {
		t.Errorf("%d chunks, %d bytes stored, in %d part ConfigMaps; want at most %d", len(idx.Parts)-1, stored, len(parts)-1, most)
	}
	t.Logf("%d tools, %d bytes of JSON: %d chunks, %d bytes stored, in %d ConfigMaps", len(tools), idx.Size, len(idx.Parts), stored, len(parts))
}

// TestEncodeTableChunksHoldNoSlack checks that every chunk of a split table
// is a slice of its own size: chunks are kept for as long as the table
// holds them, by the encoder and in the ConfigMaps a publisher holds, and a
// chunk left in the buffer it was compressed into held up to as much again.
func TestEncodeTableChunksHoldNoSlack(t *testing.T) {
	tools := tabletest.Tools(3000)
	parts, err := spec.NewTableEncoderChunked(4<<10, 64<<10).Encode(&spec.Table{Tools: tools}, "t", spec.TableStored{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, held := 0, 0
	for _, p := range parts {
		for k, c := range p.BinaryData {
			chunks++
			held += cap(c)
			// Past the allocator's rounding: an eighth at most up to
			// 32 KiB (its size classes), a page of 8 KiB beyond.
			if cap(c) > len(c)+max(len(c)/8, 8<<10) {
				t.Errorf("chunk %s/%s: %d bytes held for %d", p.Name, k, cap(c), len(c))
			}
		}
	}
	if chunks < 5 {
		t.Fatalf("%d chunks; the test wants at least 5", chunks)
	}
	t.Logf("%d chunks, %d bytes held", chunks, held)
}
