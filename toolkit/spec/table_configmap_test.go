package spec_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// files merges parts as a projected volume mounts them, failing on a key that
// two parts share.
func files(t testing.TB, parts []spec.TablePart) map[string][]byte {
	t.Helper()
	f := map[string][]byte{}
	add := func(part, k string, v []byte) {
		if _, dup := f[k]; dup {
			t.Fatalf("key %q of part %s is also in another part", k, part)
		}
		f[k] = v
	}
	for _, p := range parts {
		for k, v := range p.Data {
			add(p.Name, k, []byte(v))
		}
		for k, v := range p.BinaryData {
			add(p.Name, k, v)
		}
	}
	return f
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertSameTools(t *testing.T, got *spec.Table, want []spec.TableTool) {
	t.Helper()
	if g, w := mustJSON(t, got.Tools), mustJSON(t, want); !bytes.Equal(g, w) {
		t.Fatalf("decoded tools differ from the encoded ones:\n got %.300s\nwant %.300s", g, w)
	}
	if got.SchemaVersion != spec.SchemaVersion {
		t.Errorf("schemaVersion = %q", got.SchemaVersion)
	}
	if w := spec.TableRevision(want); got.Revision != w {
		t.Errorf("revision = %s, want %s", got.Revision, w)
	}
}

func TestEncodeTablePlain(t *testing.T) {
	tools := tabletest.Tools(20)
	shuffled := slices.Clone(tools)
	slices.Reverse(shuffled)
	in := &spec.Table{Tools: shuffled, Revision: "sha256:stale"}

	parts, err := spec.EncodeTable(in, "toolplane-tools")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || parts[0].Name != "toolplane-tools" || len(parts[0].BinaryData) != 0 {
		t.Fatalf("parts = %+v, want one plain ConfigMap toolplane-tools", parts)
	}
	if keys := slices.Collect(maps.Keys(parts[0].Data)); !slices.Equal(keys, []string{spec.TableKey}) {
		t.Fatalf("keys = %v, want [%s]", keys, spec.TableKey)
	}
	// The plain form is exactly the JSON of the sorted table, revision
	// recomputed: what DESIGN.md §5 shows under tools.json.
	want := mustJSON(t, spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools})
	if got := parts[0].Data[spec.TableKey]; got != string(want) {
		t.Fatalf("tools.json differs from the sorted table's JSON:\n got %.200s\nwant %.200s", got, want)
	}
	if shuffled[0].Name != tools[len(tools)-1].Name {
		t.Error("EncodeTable reordered the caller's tools")
	}

	got, err := spec.DecodeTable(files(t, parts))
	if err != nil {
		t.Fatal(err)
	}
	assertSameTools(t, got, tools)
}

func TestEncodeTableDeterministic(t *testing.T) {
	tools := tabletest.Tools(300)
	a, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "t", 4<<10, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(tools)
	slices.Reverse(rev)
	b, err := spec.EncodeTableChunked(&spec.Table{Tools: rev}, "t", 4<<10, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
		t.Fatal("the same tools in another order encoded to different parts")
	}
}

func TestEncodeTableEmpty(t *testing.T) {
	for _, in := range []*spec.Table{nil, {}} {
		parts, err := spec.EncodeTable(in, "t")
		if err != nil {
			t.Fatal(err)
		}
		got, err := spec.DecodeTable(files(t, parts))
		if err != nil {
			t.Fatal(err)
		}
		if got.Tools == nil || len(got.Tools) != 0 || got.Revision != spec.TableRevision(nil) {
			t.Errorf("empty table decoded as %+v; want tools [] and the revision of no tools", got)
		}
		if !strings.Contains(parts[0].Data[spec.TableKey], `"tools":[]`) {
			t.Errorf("empty table encodes tools as %s, want []", parts[0].Data[spec.TableKey])
		}
	}
}

func TestEncodeTableErrors(t *testing.T) {
	dup := []spec.TableTool{
		{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	if _, err := spec.EncodeTable(&spec.Table{Tools: dup}, "t"); !errors.Is(err, spec.ErrDuplicateTool) {
		t.Errorf("duplicate names: err = %v, want ErrDuplicateTool", err)
	}
	if _, err := spec.EncodeTable(&spec.Table{}, ""); !errors.Is(err, spec.ErrTableMalformed) {
		t.Errorf("empty name: err = %v, want ErrTableMalformed", err)
	}
	bad := []spec.TableTool{{Name: "a", InputSchema: json.RawMessage(`{`)}}
	if _, err := spec.EncodeTable(&spec.Table{Tools: bad}, "t"); err == nil {
		t.Error("a tool with an invalid schema encoded without error")
	}
	// 64 parts of 1 KiB hold far less than 300 tools gzipped.
	if _, err := spec.EncodeTableChunked(&spec.Table{Tools: tabletest.Tools(3000)}, "t", 1<<10, 1<<10); !errors.Is(err, spec.ErrTableTooLarge) {
		t.Errorf("too many parts: err = %v, want ErrTableTooLarge", err)
	}
}

func TestEncodeTableSplit(t *testing.T) {
	tools := tabletest.Tools(400)
	parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "toolplane-tools", 4<<10, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 3 {
		t.Fatalf("%d parts; the test wants at least 3", len(parts))
	}
	f := files(t, parts)
	var idx spec.TableIndex
	if err := json.Unmarshal(f[spec.TableIndexKey], &idx); err != nil {
		t.Fatal(err)
	}
	rev := spec.TableRevision(tools)
	if idx.Revision != rev || idx.Encoding != spec.TableEncodingGzip || len(idx.Parts) < len(parts) {
		t.Fatalf("index = %+v; want revision %s, gzip, at least %d parts", idx, rev, len(parts))
	}
	byName := map[string]spec.TablePart{}
	for i, p := range parts {
		if want := spec.TablePartName("toolplane-tools", i); p.Name != want {
			t.Errorf("part %d is ConfigMap %s, want %s", i, p.Name, want)
		}
		if i > 0 && len(p.Data) != 0 {
			t.Errorf("part %d carries data keys %v, want only chunks", i, p.Data)
		}
		byName[p.Name] = p
	}
	for i, ip := range idx.Parts {
		if i == 0 && ip.ConfigMap != "toolplane-tools" {
			t.Errorf("chunk 0 is in %s, want toolplane-tools", ip.ConfigMap)
		}
		chunk, ok := byName[ip.ConfigMap].BinaryData[ip.Key]
		sum := sha256.Sum256(chunk)
		if !ok || ip.Key != spec.TableChunkKey(hex.EncodeToString(sum[:])) {
			t.Errorf("chunk %d is not in %s under its digest %s", i, ip.ConfigMap, ip.Key)
		}
	}

	got, err := spec.DecodeTable(f)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTools(t, got, tools)

	// A reader also meets stale parts of a bigger, older table; they are
	// not named by the index and must not matter.
	f[spec.TablePartKey(len(parts))] = []byte("stale")
	f[spec.TablePartRevisionKey(len(parts))] = []byte("sha256:old")
	f["..data"] = nil
	if _, err := spec.DecodeTableParts(parts...); err != nil {
		t.Fatalf("DecodeTableParts: %v", err)
	}
	if _, err := spec.DecodeTable(f); err != nil {
		t.Fatalf("with stale parts around: %v", err)
	}
}

// TestEncodeTableGzipOnePart covers a table that needs gzip but no split.
func TestEncodeTableGzipOnePart(t *testing.T) {
	tools := tabletest.Tools(50)
	parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "t", 1<<10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || len(parts[0].BinaryData) != 1 || parts[0].Data[spec.TableIndexKey] == "" {
		t.Fatalf("want one ConfigMap with the index and one gzipped chunk, got %d parts", len(parts))
	}
	got, err := spec.DecodeTable(files(t, parts))
	if err != nil {
		t.Fatal(err)
	}
	assertSameTools(t, got, tools)
}

func TestDecodeTableTorn(t *testing.T) {
	enc := func(n int) []spec.TablePart {
		parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tabletest.Tools(n)}, "t", 4<<10, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) < 3 {
			t.Fatalf("%d parts; the test wants at least 3", len(parts))
		}
		return parts
	}
	older, newer := enc(400), enc(401)

	t.Run("part from another revision", func(t *testing.T) {
		mixed := append([]spec.TablePart{newer[0], older[1]}, newer[2:]...)
		_, err := spec.DecodeTable(files(t, mixed))
		if !errors.Is(err, spec.ErrTablePartMissing) {
			t.Fatalf("err = %v, want ErrTablePartMissing", err)
		}
		if !strings.Contains(err.Error(), "t-1") {
			t.Errorf("error %q does not name the torn ConfigMap t-1", err)
		}
	})
	t.Run("part missing", func(t *testing.T) {
		_, err := spec.DecodeTable(files(t, append([]spec.TablePart{newer[0]}, newer[2:]...)))
		if !errors.Is(err, spec.ErrTablePartMissing) {
			t.Fatalf("err = %v, want ErrTablePartMissing", err)
		}
	})
	t.Run("chunk does not match its digest", func(t *testing.T) {
		f := files(t, newer)
		key := onlyKey(t, newer[1])
		c := bytes.Clone(f[key])
		c[len(c)/2] ^= 0xff
		f[key] = c
		if _, err := spec.DecodeTable(f); !errors.Is(err, spec.ErrTableTorn) {
			t.Fatalf("err = %v, want ErrTableTorn", err)
		}
	})
}

// TestDecodeTableRevisionsSideBySide covers what a reader sees between a
// publisher's writes: the chunks of two revisions next to each other in the
// same ConfigMaps, under either index.
func TestDecodeTableRevisionsSideBySide(t *testing.T) {
	enc := func(n int) []spec.TablePart {
		parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tabletest.Tools(n)}, "t", 4<<10, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) < 3 {
			t.Fatalf("%d parts; the test wants at least 3", len(parts))
		}
		return parts
	}
	older, newer := enc(400), enc(300)
	for _, tc := range []struct {
		name  string
		index spec.TablePart
		want  int
	}{{"old index", older[0], 400}, {"new index", newer[0], 300}} {
		t.Run(tc.name, func(t *testing.T) {
			f := files(t, append(slices.Clone(older[1:]), newer[1:]...))
			maps.Copy(f, files(t, []spec.TablePart{tc.index}))
			got, err := spec.DecodeTable(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Tools) != tc.want {
				t.Fatalf("read %d tools, want %d", len(got.Tools), tc.want)
			}
		})
	}
}

// TestDecodeTableNumberedParts reads the form written before chunks were
// content-addressed: chunk i under TablePartKey(i), its revision next to it.
func TestDecodeTableNumberedParts(t *testing.T) {
	tools := tabletest.Tools(400)
	parts, err := spec.EncodeTableChunked(&spec.Table{Tools: tools}, "t", 4<<10, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	f := files(t, parts)
	idx, err := spec.ParseTableIndex(f[spec.TableIndexKey])
	if err != nil {
		t.Fatal(err)
	}
	legacy := map[string][]byte{}
	for i := range idx.Parts {
		legacy[spec.TablePartKey(i)] = f[idx.Parts[i].Key]
		idx.Parts[i].Key = spec.TablePartKey(i)
		if i > 0 {
			legacy[spec.TablePartRevisionKey(i)] = []byte(idx.Revision)
		}
	}
	legacy[spec.TableIndexKey] = mustJSON(t, idx)
	if got := idx.Keys(); len(got) != 2*len(idx.Parts)-1 {
		t.Errorf("Keys() = %v, want every chunk and the revisions of chunks 1 on", got)
	}
	got, err := spec.DecodeTable(legacy)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTools(t, got, tools)

	legacy[spec.TablePartRevisionKey(1)] = []byte("sha256:other")
	if _, err := spec.DecodeTable(legacy); !errors.Is(err, spec.ErrTableTorn) {
		t.Fatalf("a chunk of another revision: err = %v, want ErrTableTorn", err)
	}
}

func onlyKey(t *testing.T, p spec.TablePart) string {
	t.Helper()
	if len(p.BinaryData) != 1 {
		t.Fatalf("part %s holds %d chunks, want 1", p.Name, len(p.BinaryData))
	}
	for k := range p.BinaryData {
		return k
	}
	return ""
}

// indexed builds an indexed table by hand from an encoded payload.
func indexed(t testing.TB, encoding string, payload []byte, size int64) map[string][]byte {
	t.Helper()
	sum := sha256.Sum256(payload)
	idx := spec.TableIndex{
		SchemaVersion: spec.SchemaVersion, Revision: "sha256:x", Encoding: encoding, Size: size,
		Parts: []spec.TableIndexPart{{ConfigMap: "t", Key: spec.TablePartKey(0), Size: len(payload), SHA256: hex.EncodeToString(sum[:])}},
	}
	return map[string][]byte{spec.TableIndexKey: mustJSON(t, idx), spec.TablePartKey(0): payload}
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeTableBomb(t *testing.T) {
	// 80 MiB of zeros gzip to about 80 KiB: more than MaxTableBytes.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 80 {
		if _, err := zw.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	zw.Close()
	bomb := buf.Bytes()

	if _, err := spec.DecodeTable(indexed(t, "gzip", bomb, 1<<10)); !errors.Is(err, spec.ErrTableMalformed) || !strings.Contains(err.Error(), "past") {
		t.Errorf("bomb under a small declared size: err = %v, want ErrTableMalformed (decodes past)", err)
	}
	if _, err := spec.DecodeTable(indexed(t, "gzip", bomb, 80<<20)); !errors.Is(err, spec.ErrTableTooLarge) {
		t.Errorf("bomb declared at its size: err = %v, want ErrTableTooLarge", err)
	}
}

func TestDecodeTableForms(t *testing.T) {
	tools := tabletest.Tools(5)
	raw := mustJSON(t, spec.Table{SchemaVersion: spec.SchemaVersion, Revision: "sha256:x", Tools: tools})

	t.Run("identity chunks", func(t *testing.T) {
		got, err := spec.DecodeTable(indexed(t, "identity", raw, int64(len(raw))))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(t, got.Tools), mustJSON(t, tools); !bytes.Equal(g, w) {
			t.Fatal("identity-encoded table did not round-trip")
		}
	})

	for name, tc := range map[string]struct {
		files map[string][]byte
		want  error
	}{
		"no table":         {map[string][]byte{"..data": nil}, spec.ErrTableMalformed},
		"bad json":         {map[string][]byte{spec.TableKey: []byte(`{"tools":`)}, spec.ErrTableMalformed},
		"other schema":     {map[string][]byte{spec.TableKey: []byte(`{"schemaVersion":"toolplane.io/v2","tools":[]}`)}, spec.ErrTableMalformed},
		"bad index":        {map[string][]byte{spec.TableIndexKey: []byte(`[`)}, spec.ErrTableMalformed},
		"unknown encoding": {indexed(t, "zstd", raw, int64(len(raw))), spec.ErrTableMalformed},
		"short stream":     {indexed(t, "gzip", gzipped(t, raw), int64(len(raw))+10), spec.ErrTableMalformed},
		"not gzip":         {indexed(t, "gzip", raw, int64(len(raw))), spec.ErrTableMalformed},
		"revision differs": {indexed(t, "gzip", gzipped(t, bytes.Replace(raw, []byte("sha256:x"), []byte("sha256:y"), 1)), int64(len(raw))), spec.ErrTableTorn},
		"too many parts": {map[string][]byte{spec.TableIndexKey: mustJSON(t, spec.TableIndex{
			SchemaVersion: spec.SchemaVersion, Encoding: "gzip", Parts: make([]spec.TableIndexPart, spec.MaxTableParts+1),
		})}, spec.ErrTableTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := spec.DecodeTable(tc.files); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestEncodeTable10k is the size the operator must publish: 10,000 tools
// with realistic schemas, every ConfigMap within 512 KiB as stored.
func TestEncodeTable10k(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes about 15 MB of JSON")
	}
	tools := tabletest.Tools(10_000)
	parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
	if err != nil {
		t.Fatal(err)
	}
	raw := 0
	for _, p := range parts {
		if s := p.StoredSize(); s > spec.MaxTablePartBytes {
			t.Errorf("part %s stores %d bytes, over %d", p.Name, s, spec.MaxTablePartBytes)
		}
		for _, b := range p.BinaryData {
			raw += len(b)
		}
	}
	if len(parts) < 2 {
		t.Fatalf("%d part(s): the 10k table should need the split form", len(parts))
	}
	got, err := spec.DecodeTable(files(t, parts))
	if err != nil {
		t.Fatal(err)
	}
	assertSameTools(t, got, tools)
	t.Logf("10,000 tools: %d bytes of JSON, %d gzipped, %d ConfigMaps", len(mustJSON(t, got)), raw, len(parts))
}

func BenchmarkTable10k(b *testing.B) {
	tbl := tabletest.Table(10_000)
	raw, err := json.Marshal(tbl)
	if err != nil {
		b.Fatal(err)
	}
	parts, err := spec.EncodeTable(tbl, "toolplane-tools")
	if err != nil {
		b.Fatal(err)
	}
	f := files(b, parts)

	// The plain JSON round trip is the baseline the encoding adds to.
	b.Run("MarshalJSON", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := json.Marshal(tbl); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeTable", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := spec.EncodeTable(tbl, "toolplane-tools"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UnmarshalJSON", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var t spec.Table
			if err := json.Unmarshal(raw, &t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeTable", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := spec.DecodeTable(f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func ExampleEncodeTable() {
	table := &spec.Table{Tools: []spec.TableTool{{
		Name:        "crm_query_customer",
		SourceName:  "query_customer",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		ToolSet:     spec.ObjectReference{Namespace: "crm", Name: "crm-tools"},
	}}}
	parts, err := spec.EncodeTable(table, "toolplane-tools")
	if err != nil {
		panic(err)
	}
	for _, p := range parts {
		fmt.Println(p.Name, slices.Sorted(maps.Keys(p.Data)), p.StoredSize() <= spec.MaxTablePartBytes)
	}

	// An agent reads the same keys back from its mounted directory.
	got, err := spec.DecodeTableParts(parts...)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Tools[0].Name, got.Revision == spec.TableRevision(table.Tools))
	// Output:
	// toolplane-tools [tools.json] true
	// crm_query_customer true
}

// BenchmarkDecodeTableDeclaredSize decodes one small gzipped table under an
// honest index and under an index that declares the largest size allowed. A
// reader's memory must follow what the parts decode to, not what the index
// claims: compare B/op of the two.
func BenchmarkDecodeTableDeclaredSize(b *testing.B) {
	tools := []spec.TableTool{{
		Name: "get_weather", SourceName: "get_weather",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		ToolSet:     spec.ObjectReference{Namespace: "weather", Name: "weather-tools"},
	}}
	raw := mustJSON(b, spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools})
	payload := gzipped(b, raw)
	for _, c := range []struct {
		name string
		size int64
	}{{"honest", int64(len(raw))}, {"declares-max", spec.MaxTableBytes}} {
		files := indexed(b, spec.TableEncodingGzip, payload, c.size)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = spec.DecodeTable(files)
			}
		})
	}
}

// BenchmarkTableChange encodes one-tool changes to the 10,000-tool table as
// a publisher does: after the stored index, with the encoder of the
// previous write. changed-B/op is what the change adds to the API server:
// the base ConfigMap and the new chunks, as stored (a part ConfigMap also
// carries the old chunk until its grace has passed).
func BenchmarkTableChange(b *testing.B) {
	tools := tabletest.Tools(10_000)
	other := slices.Clone(tools)
	other[len(other)/2].Description += " Also archived ones."
	enc := new(spec.TableEncoder)
	tables := []*spec.Table{{Tools: tools}, {Tools: other}}
	var stored [2][]spec.TablePart
	for i, t := range tables {
		parts, err := enc.Encode(t, "toolplane-tools", spec.TableStored{})
		if err != nil {
			b.Fatal(err)
		}
		stored[i] = parts
	}
	b.Run("OneTool", func(b *testing.B) {
		changed := 0
		n := 0
		for i := 0; b.Loop(); i++ {
			prev := stored[i%2]
			parts, err := enc.Encode(tables[(i+1)%2], "toolplane-tools", spec.TableStored{Index: index(b, prev)})
			if err != nil {
				b.Fatal(err)
			}
			changed += changedBytes(b, prev, parts)
			n++
		}
		b.ReportMetric(float64(changed)/float64(n), "changed-B/op")
	})
	// The same without the encoder's cache of compressed segments: what
	// the cache saves.
	b.Run("OneToolUncached", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := spec.EncodeTableAfter(tables[(i+1)%2], "toolplane-tools", index(b, stored[i%2])); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// changedBytes returns the stored size of the base of after and of its
// chunks that before does not have.
func changedBytes(b *testing.B, before, after []spec.TablePart) int {
	old := files(b, before)
	n := after[0].StoredSize()
	for _, p := range after[1:] {
		for k, v := range p.BinaryData {
			if _, ok := old[k]; !ok {
				n += spec.TablePart{BinaryData: map[string][]byte{k: v}}.StoredSize()
			}
		}
	}
	return n
}
