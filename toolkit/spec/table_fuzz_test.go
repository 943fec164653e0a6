package spec_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// fuzzTable is a small table that the seeds encode in every form.
func fuzzTable() *spec.Table {
	return &spec.Table{Tools: []spec.TableTool{
		{Name: "crm_query", SourceName: "query", Description: "Finds customers.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			ToolSet: spec.ObjectReference{Namespace: "crm", Name: "tools"}, Endpoints: &spec.Endpoints{Invoke: "http://t.crm.svc:8080/tools/query", MCP: "http://t.crm.svc:8080/mcp"}},
		{Name: "weather", SourceName: "weather", InputSchema: json.RawMessage(`{"type":"object"}`), Meta: map[string]any{spec.MetaVersion: "1.0.0"},
			ToolSet: spec.ObjectReference{Namespace: "w", Name: "w"}},
	}}
}

// checkDecoded holds for whatever DecodeTable returns: an error that is one
// of the package's sentinels, or a table that survives a round trip through
// EncodeTable unchanged.
func checkDecoded(t *testing.T, got *spec.Table, err error) {
	t.Helper()
	if err != nil {
		if got != nil {
			t.Fatalf("DecodeTable returned a table and the error %v", err)
		}
		for _, sentinel := range []error{spec.ErrTableMalformed, spec.ErrTableTorn, spec.ErrTablePartMissing, spec.ErrTableTooLarge} {
			if errors.Is(err, sentinel) {
				return
			}
		}
		t.Fatalf("DecodeTable failed with %v, which wraps none of the package's errors", err)
	}
	if got.SchemaVersion != spec.SchemaVersion {
		t.Fatalf("decoded a table of schemaVersion %q", got.SchemaVersion)
	}
	parts, err := spec.EncodeTable(got, "t")
	if errors.Is(err, spec.ErrDuplicateTool) || errors.Is(err, spec.ErrTableTooLarge) {
		// A hand-made table may repeat a name; the decoder need not refuse it.
		return
	}
	if err != nil {
		t.Fatalf("re-encoding a decoded table: %v", err)
	}
	again, err := spec.DecodeTableParts(parts...)
	if err != nil {
		t.Fatalf("decoding a re-encoded table: %v", err)
	}
	want := append(make([]spec.TableTool, 0, len(got.Tools)), got.Tools...)
	spec.SortTableTools(want)
	if g, w := mustJSON(t, append(make([]spec.TableTool, 0, len(again.Tools)), again.Tools...)), mustJSON(t, want); !bytes.Equal(g, w) {
		t.Fatalf("round trip changed the tools:\n got %.300s\nwant %.300s", g, w)
	}
}

// FuzzDecodeTable feeds DecodeTable the files of a projected volume as an
// attacker or a torn update may leave them: any index, any chunks, any
// revision keys, any plain table.
func FuzzDecodeTable(f *testing.F) {
	add := func(parts []spec.TablePart, err error) {
		if err != nil {
			f.Fatal(err)
		}
		fs := map[string][]byte{}
		for _, p := range parts {
			for k, v := range p.Data {
				fs[k] = []byte(v)
			}
			for k, v := range p.BinaryData {
				fs[k] = v
			}
		}
		f.Add(fs[spec.TableKey], fs[spec.TableIndexKey], fs[spec.TablePartKey(0)], fs[spec.TablePartKey(1)], fs[spec.TablePartRevisionKey(1)])
	}
	add(spec.EncodeTable(fuzzTable(), "t"))
	add(spec.EncodeTableChunked(fuzzTable(), "t", 64, 1<<20))
	add(spec.EncodeTableChunked(fuzzTable(), "t", 64, 128))
	add(spec.EncodeTable(&spec.Table{}, "t"))
	f.Add([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"a"},{"name":"a"}]}`), []byte(nil), []byte(nil), []byte(nil), []byte(nil))

	f.Fuzz(func(t *testing.T, plain, index, chunk0, chunk1, rev1 []byte) {
		files := map[string][]byte{}
		for k, v := range map[string][]byte{
			spec.TableKey: plain, spec.TableIndexKey: index,
			spec.TablePartKey(0): chunk0, spec.TablePartKey(1): chunk1, spec.TablePartRevisionKey(1): rev1,
		} {
			if len(v) > 0 {
				files[k] = v
			}
		}
		got, err := spec.DecodeTable(files)
		checkDecoded(t, got, err)
	})
}

// FuzzDecodeTableIndexed reaches past the digest checks, which random
// chunks never pass: the fuzzer picks the payload, how it is split and what
// the index declares, and the digests are made to match.
func FuzzDecodeTableIndexed(f *testing.F) {
	raw := mustJSON(f, struct {
		SchemaVersion string           `json:"schemaVersion"`
		Revision      string           `json:"revision"`
		Tools         []spec.TableTool `json:"tools"`
	}{spec.SchemaVersion, spec.TableRevision(fuzzTable().Tools), fuzzTable().Tools})
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write(raw); err != nil {
		f.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		f.Fatal(err)
	}
	rev := spec.TableRevision(fuzzTable().Tools)
	f.Add(z.Bytes(), true, int64(len(raw)), rev, uint8(1))
	f.Add(z.Bytes(), true, int64(len(raw)), rev, uint8(3))
	f.Add(raw, false, int64(len(raw)), rev, uint8(2))
	f.Add(z.Bytes(), true, int64(len(raw)-1), rev, uint8(1))
	f.Add(z.Bytes(), true, int64(spec.MaxTableBytes), rev, uint8(1))
	// The split form's chunks: independent gzip members, cut between tools.
	cut := bytes.Index(raw, []byte(`,{"name":"weather"`))
	members := append(gzipped(f, raw[:cut]), gzipped(f, raw[cut:])...)
	f.Add(members, true, int64(len(raw)), rev, uint8(2))
	f.Add(members, true, int64(len(raw)), rev, uint8(3))
	// And the same members in one chunk next to a split table's own.
	parts, err := spec.EncodeTableChunked(&spec.Table{Tools: fuzzTable().Tools}, "t", 64, 200)
	if err != nil {
		f.Fatal(err)
	}
	var all []byte
	for _, p := range index(f, parts).Parts {
		all = append(all, files(f, parts)[p.Key]...)
	}
	f.Add(all, true, int64(len(raw)), rev, uint8(3))

	f.Fuzz(func(t *testing.T, payload []byte, gz bool, size int64, revision string, nparts uint8) {
		n := int(nparts)%4 + 1
		enc := "identity"
		if gz {
			enc = spec.TableEncodingGzip
		}
		idx := spec.TableIndex{SchemaVersion: spec.SchemaVersion, Revision: revision, Encoding: enc, Size: size}
		files := map[string][]byte{}
		step := (len(payload) + n - 1) / n
		for i := range n {
			chunk := payload[min(i*step, len(payload)):min((i+1)*step, len(payload))]
			sum := sha256.Sum256(chunk)
			idx.Parts = append(idx.Parts, spec.TableIndexPart{
				ConfigMap: spec.TablePartName("t", i), Key: spec.TablePartKey(i), Size: len(chunk), SHA256: hex.EncodeToString(sum[:]),
			})
			files[spec.TablePartKey(i)] = chunk
			if i > 0 {
				files[spec.TablePartRevisionKey(i)] = []byte(revision)
			}
		}
		files[spec.TableIndexKey] = mustJSON(t, idx)
		got, err := spec.DecodeTable(files)
		checkDecoded(t, got, err)
	})
}
