package spec_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// tableOf returns a table of the names of records, with their records.
func tableOf(records map[string]spec.TableRecord) *spec.Table {
	t := &spec.Table{}
	for _, name := range slices.Sorted(maps.Keys(records)) {
		t.Tools = append(t.Tools, spec.TableTool{Name: name})
		t.Records = append(t.Records, records[name])
	}
	return t
}

func TestTableLedgerRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	records := map[string]spec.TableRecord{
		"a": {Since: at.Add(500 * time.Millisecond), Why: "Claimed"},
		"b": {Since: at, Why: "Claimed"},
		"c": {Since: at.Add(time.Hour), Why: "HandedOver"},
	}
	v := encodeLedger(tableOf(records), "sha256:r", spec.MaxTablePartBytes)
	// Grouped by record, to the second, the earliest first.
	want := `{"revision":"sha256:r","records":[{"since":"2026-12-01T15:00:00Z","why":"Claimed","names":["a","b"]},` +
		`{"since":"2026-12-01T16:00:00Z","why":"HandedOver","names":["c"]}]}` + "\n"
	if got := gunzip(t, v); got != want {
		t.Fatalf("ledger\n got %s\nwant %s", got, want)
	}
	got, err := spec.DecodeTableLedger(v, "sha256:r")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range records {
		r.Since = r.Since.Truncate(time.Second)
		if g := got[name]; !g.Since.Equal(r.Since) || g.Why != r.Why {
			t.Errorf("record of %s = %+v, want %+v", name, g, r)
		}
	}
	if len(got) != len(records) {
		t.Errorf("%d records, want %d", len(got), len(records))
	}

	// A ledger beside another revision describes another table.
	if got, err := spec.DecodeTableLedger(v, "sha256:other"); err != nil || got != nil {
		t.Errorf("a ledger of another revision = %v, %v; want none", got, err)
	}
	if got, err := spec.DecodeTableLedger(nil, "sha256:r"); err != nil || got != nil {
		t.Errorf("no ledger = %v, %v", got, err)
	}
	if _, err := spec.DecodeTableLedger([]byte("{"), "sha256:r"); err == nil {
		t.Error("a malformed ledger reads back")
	}
	if v := encodeLedger(&spec.Table{}, "sha256:r", spec.MaxTablePartBytes); v != nil {
		t.Errorf("no record = %q, want none", v)
	}
	if v := encodeLedger(tableOf(records), "sha256:r", 0); v != nil {
		t.Errorf("no room = %q, want none", v)
	}
}

func TestTableLedgerBounded(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	records := map[string]spec.TableRecord{}
	name := func(i int) string { return fmt.Sprintf("tool_%06d_%x", i, i*2654435761) }
	for i := range 40000 {
		// Every record its own group: the largest ledger of these names.
		records[name(i)] = spec.TableRecord{Since: at.Add(time.Duration(i) * time.Second), Why: "Claimed"}
	}
	const room = 64 << 10
	v := encodeLedger(tableOf(records), "sha256:r", room)
	if n := base64.StdEncoding.EncodedLen(len(v)); n > room {
		t.Fatalf("ledger of %d bytes stored, at most %d", n, room)
	}
	got, err := spec.DecodeTableLedger(v, "sha256:r")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) == len(records) {
		t.Fatalf("%d of %d records kept", len(got), len(records))
	}
	// The earliest records are kept: the first names, by since.
	for i := range len(got) {
		if _, ok := got[name(i)]; !ok {
			t.Fatalf("record %d of %s left out, though %d are kept", i, name(i), len(got))
		}
	}
	t.Logf("%d of %d records in %d bytes stored", len(got), len(records), base64.StdEncoding.EncodedLen(len(v)))
}

// TestTableLedgerIgnoredByReaders checks the compatibility of the ledger:
// a table read with the ledger key beside it, as a reader that does not
// know the key sees it, is the same table.
func TestTableLedgerIgnoredByReaders(t *testing.T) {
	for _, n := range []int{20, 3000} {
		tools := tabletest.Tools(n)
		parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
		if err != nil {
			t.Fatal(err)
		}
		plain, err := spec.DecodeTable(files(t, parts))
		if err != nil {
			t.Fatal(err)
		}
		bin := maps.Clone(parts[0].BinaryData)
		if bin == nil {
			bin = map[string][]byte{}
		}
		bin[spec.TableLedgerKey] = encodeLedger(
			tableOf(map[string]spec.TableRecord{tools[0].Name: {Since: time.Unix(1, 0), Why: "Claimed"}}), plain.Revision, spec.MaxTablePartBytes)
		parts[0].BinaryData = bin
		got, err := spec.DecodeTable(files(t, parts))
		if err != nil {
			t.Fatalf("%d tools: a table with a ledger beside it: %v", n, err)
		}
		assertSameTools(t, got, tools)
		if got.Records != nil {
			t.Errorf("%d tools: DecodeTable read the ledger; the publisher does, apart", n)
		}
	}
}

// encodeLedger is spec.EncodeTableLedger of t's tools and records.
func encodeLedger(t *spec.Table, revision string, maxStored int) []byte {
	tools := make([]*spec.TableTool, len(t.Tools))
	for i := range t.Tools {
		tools[i] = &t.Tools[i]
	}
	return spec.EncodeTableLedger(tools, t.Records, revision, maxStored)
}
