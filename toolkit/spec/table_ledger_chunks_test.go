package spec_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ledgerOf returns n tools of owners ToolSets of n/owners names each, and
// a record for every one: each owner's names claimed at one second.
func ledgerOf(n, owners int) ([]spec.TableTool, []spec.TableRecord) {
	at := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	tools := make([]spec.TableTool, n)
	records := make([]spec.TableRecord, n)
	for i := range tools {
		o := i % owners
		tools[i] = spec.TableTool{
			Name:       fmt.Sprintf("ts%04d_tool_%05d", o, i),
			ToolSet:    spec.ObjectReference{Namespace: fmt.Sprintf("ns-%03d", o%100), Name: fmt.Sprintf("set-%04d", o)},
			ToolSetUID: fmt.Sprintf("uid-%04d", o),
		}
		records[i] = spec.TableRecord{Since: at.Add(time.Duration(o) * time.Second), Why: "Claimed"}
	}
	spec.SortTableTools(tools)
	return tools, records
}

func refs(tools []spec.TableTool) []*spec.TableTool {
	out := make([]*spec.TableTool, len(tools))
	for i := range tools {
		out[i] = &tools[i]
	}
	return out
}

func encodeChunks(t testing.TB, e *spec.TableLedgerEncoder, tools []spec.TableTool, records []spec.TableRecord, n int) []spec.TablePart {
	t.Helper()
	parts, err := e.Encode(refs(tools), records, "toolplane-tools", n)
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// byName maps each part's name to its chunk's bytes.
func byName(parts []spec.TablePart) map[string]string {
	out := map[string]string{}
	for _, p := range parts {
		out[p.Name] = string(p.BinaryData[spec.TableLedgerChunkKey])
	}
	return out
}

func TestTableLedgerChunksRoundTrip(t *testing.T) {
	tools, records := ledgerOf(5000, 500)
	n := spec.TableLedgerChunks(len(tools), 0)
	if n != 8 {
		t.Fatalf("5000 names in %d chunks, want 8", n)
	}
	parts := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, records, n)
	if len(parts) != n {
		t.Fatalf("%d parts, want %d", len(parts), n)
	}
	for i, p := range parts {
		if c, of, ok := spec.ParseTableLedgerName("toolplane-tools", p.Name); !ok || c != i || of != n {
			t.Errorf("part %d is %s", i, p.Name)
		}
		if len(p.Data) != 0 || len(p.BinaryData) != 1 || p.StoredSize() > spec.MaxTablePartBytes {
			t.Errorf("part %s holds %d data keys, %d binary keys, %d bytes", p.Name, len(p.Data), len(p.BinaryData), p.StoredSize())
		}
	}
	// In any order, with the table's parts beside them: the same records.
	slices.Reverse(parts)
	table, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
	if err != nil {
		t.Fatal(err)
	}
	got, err := spec.DecodeTableLedgerChunks(tools, "toolplane-tools", append(parts, table...)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tools) {
		t.Fatalf("%d records for %d tools", len(got), len(tools))
	}
	for i := range tools {
		if !got[i].Since.Equal(records[i].Since) || got[i].Why != records[i].Why {
			t.Fatalf("record of %s = %+v, want %+v", tools[i].Name, got[i], records[i])
		}
	}

	// Byte-identical for the same input, from a new encoder too.
	again := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, records, n)
	slices.Reverse(parts)
	if !equalChunks(byName(parts), byName(again)) {
		t.Error("the same ledger encodes to other bytes")
	}
	if none := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, make([]spec.TableRecord, len(tools)), n); len(none) != 0 {
		t.Errorf("no record: %d parts", len(none))
	}
	if _, err := new(spec.TableLedgerEncoder).Encode(refs(tools), records[1:], "toolplane-tools", n); err == nil {
		t.Error("records not aligned with the tools are encoded")
	}
	if _, err := new(spec.TableLedgerEncoder).Encode(refs(tools), records, "toolplane-tools", 3); err == nil {
		t.Error("a ledger of 3 chunks is encoded")
	}
}

func equalChunks(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTableLedgerChunksOneChange checks what makes the ledger cheap to
// write: a change to a tool's content changes no chunk, a ToolSet that
// claims or drops names changes the one chunk of its records, and a name
// handed over the chunks of the two owners.
func TestTableLedgerChunksOneChange(t *testing.T) {
	tools, records := ledgerOf(10000, 1000)
	n := spec.TableLedgerChunks(len(tools), 0)
	e := &spec.TableLedgerEncoder{}
	before := byName(encodeChunks(t, e, tools, records, n))

	content := slices.Clone(tools)
	content[4321].Description = "changed"
	content[4321].InputSchema = []byte(`{"type":"object"}`)
	if after := byName(encodeChunks(t, e, content, records, n)); !equalChunks(before, after) {
		t.Error("a change of content changed the ledger")
	}

	chunkOf := func(owner spec.ObjectReference) string {
		return spec.TableLedgerName("toolplane-tools", spec.TableLedgerChunkOf(owner, n), n)
	}
	other := spec.ObjectReference{Namespace: "other", Name: "other"}
	owner := tools[4321].ToolSet
	if chunkOf(other) == chunkOf(owner) {
		t.Fatal("pick another owner: both fall in one chunk")
	}
	for _, change := range []struct {
		what string
		do   func(tools []spec.TableTool, records []spec.TableRecord) ([]spec.TableTool, []spec.TableRecord)
		want []string
	}{
		{"a name handed over", func(tools []spec.TableTool, records []spec.TableRecord) ([]spec.TableTool, []spec.TableRecord) {
			tools[4321].ToolSet, tools[4321].ToolSetUID = other, "uid-other"
			records[4321] = spec.TableRecord{Since: records[4321].Since.Add(time.Hour), Why: "HandedOver"}
			return tools, records
		}, []string{chunkOf(owner), chunkOf(other)}},
		{"the owner under a new object", func(tools []spec.TableTool, records []spec.TableRecord) ([]spec.TableTool, []spec.TableRecord) {
			for i := range tools {
				if tools[i].ToolSet == owner {
					tools[i].ToolSetUID = "uid-again"
				}
			}
			return tools, records
		}, []string{chunkOf(owner)}},
		{"a new ToolSet's ten names", func(tools []spec.TableTool, records []spec.TableRecord) ([]spec.TableTool, []spec.TableRecord) {
			for j := range 10 {
				tools = append(tools, spec.TableTool{Name: fmt.Sprintf("new_%02d", j), ToolSet: other, ToolSetUID: "uid-other"})
				records = append(records, spec.TableRecord{Since: time.Unix(1e9, 0), Why: "Claimed"})
			}
			return tools, records
		}, []string{chunkOf(other)}},
		{"a name dropped", func(tools []spec.TableTool, records []spec.TableRecord) ([]spec.TableTool, []spec.TableRecord) {
			return slices.Delete(tools, 4321, 4322), slices.Delete(records, 4321, 4322)
		}, []string{chunkOf(owner)}},
	} {
		tools, records := change.do(slices.Clone(tools), slices.Clone(records))
		after := byName(encodeChunks(t, e, tools, records, n))
		var changed []string
		for name, v := range after {
			if before[name] != v {
				changed = append(changed, name)
			}
		}
		slices.Sort(changed)
		slices.Sort(change.want)
		if !slices.Equal(changed, change.want) || len(after) != len(before) {
			t.Errorf("%s: chunks changed %v, want %v", change.what, changed, change.want)
		}
	}
}

// TestTableLedgerChunksOwnerChecked checks that a record counts only for
// the owner it was written for, and only from the chunk its name falls
// in: a chunk written before a table write that did not follow describes
// another table.
func TestTableLedgerChunksOwnerChecked(t *testing.T) {
	tools, records := ledgerOf(3000, 30)
	n := spec.TableLedgerChunks(len(tools), 0)
	parts := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, records, n)

	now := slices.Clone(tools)
	now[7].ToolSet.Name = "someone-else"
	now[8].ToolSetUID = "uid-recreated"
	got, err := spec.DecodeTableLedgerChunks(now, "toolplane-tools", parts...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range now {
		want := records[i]
		if i == 7 || i == 8 {
			want = spec.TableRecord{}
		}
		if !got[i].Since.Equal(want.Since) || got[i].Why != want.Why {
			t.Fatalf("record of %s = %+v, want %+v", now[i].Name, got[i], want)
		}
	}

	// The chunks of another n hold the same names elsewhere: none is read
	// from a chunk it does not fall in.
	moved := slices.Clone(parts)
	for i := range moved {
		c, of, _ := spec.ParseTableLedgerName("toolplane-tools", moved[i].Name)
		moved[i].Name = spec.TableLedgerName("toolplane-tools", (c+1)%of, of)
	}
	if got, err := spec.DecodeTableLedgerChunks(tools, "toolplane-tools", moved...); err != nil || got != nil {
		t.Errorf("chunks under each other's names: %d records, %v; want none", len(got), err)
	}

	// Two layouts side by side, one behind: the later record stands.
	later := slices.Clone(records)
	later[5].Since = later[5].Since.Add(time.Hour)
	other := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, later, 2*n)
	both := append(slices.Clone(other), parts...)
	for _, order := range [][]spec.TablePart{both, append(slices.Clone(parts), other...)} {
		got, err := spec.DecodeTableLedgerChunks(tools, "toolplane-tools", order...)
		if err != nil {
			t.Fatal(err)
		}
		if !got[5].Since.Equal(later[5].Since) || !got[6].Since.Equal(records[6].Since) {
			t.Errorf("two layouts: %v and %v, want %v and %v", got[5].Since, got[6].Since, later[5].Since, records[6].Since)
		}
	}
}

func TestTableLedgerChunksLayout(t *testing.T) {
	for _, c := range []struct{ names, stored, want int }{
		{0, 0, 1},
		{10, 0, 1},
		{1024, 0, 1},
		{1025, 0, 2},
		{10000, 0, 16},
		{10000, 8, 16},   // too few: grows
		{10000, 64, 64},  // within eight times as many: stays
		{3000, 16, 16},   // the table shrank, not to an eighth
		{1000, 16, 1},    // to an eighth: shrinks
		{10000, 12, 16},  // not a power of two
		{1 << 30, 0, 64}, // bounded
		{1 << 30, 128, 64},
	} {
		if got := spec.TableLedgerChunks(c.names, c.stored); got != c.want {
			t.Errorf("TableLedgerChunks(%d, %d) = %d, want %d", c.names, c.stored, got, c.want)
		}
	}
	for _, name := range []string{"toolplane-tools", "toolplane-tools-1", "toolplane-tools.ledger-0-of-3", "toolplane-tools.ledger-2-of-2",
		"toolplane-tools.ledger-01-of-2", "toolplane-tools.ledger-0-of-128", "toolplane-tools.ledger--1-of-2", "other.ledger-0-of-1"} {
		if _, _, ok := spec.ParseTableLedgerName("toolplane-tools", name); ok {
			t.Errorf("%s parses as a ledger chunk", name)
		}
	}
	// Every owner falls in one chunk, and n chunks split those of n/2.
	for i := range 1000 {
		owner := spec.ObjectReference{Namespace: "ns", Name: fmt.Sprintf("set_%d", i)}
		if a, b := spec.TableLedgerChunkOf(owner, 8), spec.TableLedgerChunkOf(owner, 16); a < 0 || a >= 8 || b/2 != a {
			t.Fatalf("%s: chunk %d of 8, %d of 16", owner, a, b)
		}
	}
}

// TestTableLedgerChunksBounded checks what bounds a reader: a chunk that
// decompresses past the bound is refused, the others still read, and a
// chunk too large to store keeps each namespace's earliest records.
func TestTableLedgerChunksBounded(t *testing.T) {
	tools, records := ledgerOf(2048, 2048)
	parts := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, records, 2)
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	_, _ = zw.Write([]byte(`{"schemaVersion":"` + spec.SchemaVersion + `","records":[],"x":"`))
	zero := make([]byte, 1<<20)
	for range spec.MaxTableLedgerBytes >> 20 {
		_, _ = zw.Write(zero)
	}
	_ = zw.Close()
	// The bomb sorts first, so it takes the budget before the others.
	in := append([]spec.TablePart{{Name: "toolplane-tools.ledger-0-of-1", BinaryData: map[string][]byte{spec.TableLedgerChunkKey: bomb.Bytes()}},
		{Name: "toolplane-tools.ledger-0-of-4", BinaryData: map[string][]byte{spec.TableLedgerChunkKey: []byte("not gzip")}}}, parts...)
	got, err := spec.DecodeTableLedgerChunks(tools, "toolplane-tools", in...)
	if !errors.Is(err, spec.ErrTableTooLarge) {
		t.Fatalf("a bomb: %v", err)
	}
	// The budget is spent: what is left after the bomb is not read.
	if got != nil {
		t.Errorf("%d records read past the budget", len(got))
	}
	got, err = spec.DecodeTableLedgerChunks(tools, "toolplane-tools", in[1:]...)
	if !errors.Is(err, spec.ErrTableMalformed) || len(got) != len(tools) || got[0].Why == "" {
		t.Errorf("a malformed chunk beside good ones: %d records, %v", len(got), err)
	}

	// Every name its own group, with long names: too large for one chunk.
	many, recs := ledgerOf(40000, 40000)
	for i := range many {
		many[i].Name = fmt.Sprintf("%s_%x", strings.Repeat("n", 60), i*2654435761)
	}
	big := encodeChunks(t, &spec.TableLedgerEncoder{}, many, recs, 1)
	if len(big) != 1 {
		t.Fatalf("%d parts", len(big))
	}
	if n := big[0].StoredSize(); n > spec.MaxTablePartBytes {
		t.Fatalf("a chunk of %d bytes stored", n)
	}
	back, err := spec.DecodeTableLedgerChunks(many, "toolplane-tools", big...)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	latest := map[string]time.Time{}
	for i, r := range back {
		if r.Why != "" {
			kept++
			ns := many[i].ToolSet.Namespace
			latest[ns] = later(latest[ns], r.Since)
		}
	}
	if kept == 0 || kept == len(many) {
		t.Fatalf("%d of %d records kept", kept, len(many))
	}
	// Each namespace keeps its earliest: ledgerOf's 100 namespaces are
	// alike, so each keeps about as many.
	for i, r := range back {
		if ns := many[i].ToolSet.Namespace; r.Why == "" && recs[i].Since.Before(latest[ns]) {
			t.Fatalf("record of %s (since %v) left out, though one of %s since %v is kept", many[i].Name, recs[i].Since, ns, latest[ns])
		}
	}
	t.Logf("%d of %d records in %d bytes stored (%d of base64)", kept, len(many), big[0].StoredSize(), base64.StdEncoding.EncodedLen(len(big[0].BinaryData[spec.TableLedgerChunkKey])))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestTableLedgerChunksIgnoredByReaders checks that the chunks change
// nothing for a reader: their ConfigMaps are not named as the table's
// parts, and a reader handed them reads the same table.
func TestTableLedgerChunksIgnoredByReaders(t *testing.T) {
	for _, n := range []int{20, 3000} {
		tools := tabletest.Tools(n)
		records := make([]spec.TableRecord, n)
		for i := range records {
			records[i] = spec.TableRecord{Since: time.Unix(int64(i), 0), Why: "Claimed"}
		}
		table, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
		if err != nil {
			t.Fatal(err)
		}
		ledger := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, records, spec.TableLedgerChunks(n, 0))
		for _, p := range ledger {
			if p.Name == "toolplane-tools" || strings.HasPrefix(p.Name, "toolplane-tools-") {
				t.Errorf("ledger chunk %s is named as a part of the table", p.Name)
			}
		}
		got, err := spec.DecodeTableParts(append(table, ledger...)...)
		if err != nil {
			t.Fatalf("%d tools: a table with its ledger's chunks: %v", n, err)
		}
		assertSameTools(t, got, tools)
		if got.Records != nil {
			t.Errorf("%d tools: DecodeTable read the ledger", n)
		}
	}
}

// TestTableLedgerChunksGiveUIDs checks that the ledger gives the entries
// read back from a table, which carry no UID, their owners' UIDs: from
// the record of each name, the later of two layouts' where both hold one;
// and that a tool that has a UID keeps it, and a record of another UID
// does not count for it.
func TestTableLedgerChunksGiveUIDs(t *testing.T) {
	tools, records := ledgerOf(3000, 30)
	n := spec.TableLedgerChunks(len(tools), 0)
	parts := encodeChunks(t, &spec.TableLedgerEncoder{}, tools, records, n)

	read := slices.Clone(tools)
	for i := range read {
		read[i].ToolSetUID = ""
	}
	read[9].ToolSetUID = "uid-known"
	read[10].ToolSet.Name = "someone-else"
	got, err := spec.DecodeTableLedgerChunks(read, "toolplane-tools", parts...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range read {
		want, rec := tools[i].ToolSetUID, records[i]
		switch i {
		case 9:
			want, rec = "uid-known", spec.TableRecord{}
		case 10:
			want, rec = "", spec.TableRecord{}
		}
		if read[i].ToolSetUID != want || got[i].Why != rec.Why {
			t.Fatalf("%s read back as %q, %+v; want %q, %+v", read[i].Name, read[i].ToolSetUID, got[i], want, rec)
		}
	}

	// The owner of tool 5 deleted and created again, and the ledger cut
	// into twice as many chunks, by a writer stopped before it removed the
	// old ones: the later record, the new object's, stands.
	again := slices.Clone(tools)
	later := slices.Clone(records)
	for i := range again {
		if again[i].ToolSet == tools[5].ToolSet {
			again[i].ToolSetUID = "uid-again"
			later[i] = spec.TableRecord{Since: records[i].Since.Add(time.Minute), Why: "Claimed"}
		}
	}
	both := append(encodeChunks(t, &spec.TableLedgerEncoder{}, again, later, 2*n), parts...)
	for _, order := range [][]spec.TablePart{both, slices.Concat(both[len(both)-len(parts):], both[:len(both)-len(parts)])} {
		read := slices.Clone(tools)
		for i := range read {
			read[i].ToolSetUID = ""
		}
		if _, err := spec.DecodeTableLedgerChunks(read, "toolplane-tools", order...); err != nil {
			t.Fatal(err)
		}
		for i := range read {
			if read[i].ToolSetUID != again[i].ToolSetUID {
				t.Fatalf("%s read back with UID %q, want %q", read[i].Name, read[i].ToolSetUID, again[i].ToolSetUID)
			}
		}
		// The owners alone, as a gateway reads them: the same UIDs.
		owners, err := spec.DecodeTableLedgerOwners("toolplane-tools", order...)
		if err != nil {
			t.Fatal(err)
		}
		if len(owners) != 30 {
			t.Fatalf("%d owners read, want 30", len(owners))
		}
		for _, tt := range again {
			if owners[tt.ToolSet] != tt.ToolSetUID {
				t.Fatalf("owner %s read with UID %q, want %q", tt.ToolSet, owners[tt.ToolSet], tt.ToolSetUID)
			}
		}
	}
	// A chunk under another's name counts for no owner.
	moved := slices.Clone(parts)
	for i := range moved {
		c, of, _ := spec.ParseTableLedgerName("toolplane-tools", moved[i].Name)
		moved[i].Name = spec.TableLedgerName("toolplane-tools", (c+1)%of, of)
	}
	if owners, err := spec.DecodeTableLedgerOwners("toolplane-tools", moved...); err != nil || len(owners) != 0 {
		t.Errorf("chunks under each other's names: %d owners, %v; want none", len(owners), err)
	}
}

// TestTableLedgerChunkCutSparesSmallNamespaces checks that a tenant cannot
// push another's records, and with them the owners' UIDs that only the
// ledger keeps, out of a chunk their owners share: five ToolSets of 1,000
// long, incompressible names each (what the default ceilings let one
// namespace publish), all claimed first and named to fall in the chunk of
// a victim's ToolSet of ten names. The victim keeps every record; the
// chunk is filled with the tenant's earliest. Before the cut was fair, the
// earliest records were kept whatever their namespace, and the victim's
// went.
func TestTableLedgerChunkCutSparesSmallNamespaces(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	victim := spec.ObjectReference{Namespace: "victim", Name: "tools"}
	var tools []spec.TableTool
	var records []spec.TableRecord
	n := spec.TableLedgerChunks(5000+10, 0)
	want := spec.TableLedgerChunkOf(victim, n)
	for s, found := 0, 0; found < 5; s++ {
		owner := spec.ObjectReference{Namespace: "attacker", Name: fmt.Sprintf("set-%d", s)}
		if spec.TableLedgerChunkOf(owner, n) != want {
			continue
		}
		found++
		for range 1000 {
			b := make([]byte, 128)
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			tools = append(tools, spec.TableTool{Name: string(b), ToolSet: owner, ToolSetUID: "uid-attacker-" + owner.Name})
			records = append(records, spec.TableRecord{Since: at, Why: "Claimed"})
		}
	}
	for i := range 10 {
		tools = append(tools, spec.TableTool{Name: fmt.Sprintf("victim_tool_%d", i), ToolSet: victim, ToolSetUID: "uid-victim"})
		records = append(records, spec.TableRecord{Since: at.Add(time.Hour), Why: "Claimed"})
	}
	parts, err := new(spec.TableLedgerEncoder).Encode(refs(tools), records, "toolplane-tools", n)
	if err != nil {
		t.Fatal(err)
	}
	read := slices.Clone(tools)
	for i := range read {
		read[i].ToolSetUID = "" // as decoded from the table
	}
	got, err := spec.DecodeTableLedgerChunks(read, "toolplane-tools", parts...)
	if err != nil {
		t.Fatal(err)
	}
	attackers := 0
	for i, tt := range read {
		switch {
		case tt.ToolSet == victim && (tt.ToolSetUID != "uid-victim" || got[i].Why == ""):
			t.Fatalf("the victim's %s read back with UID %q and record %+v: another tenant's records filled its chunk", tt.Name, tt.ToolSetUID, got[i])
		case tt.ToolSet != victim && got[i].Why != "":
			attackers++
		}
	}
	// The chunk was too large, and the cut left it mostly full.
	if attackers == 0 || attackers >= 5000 {
		t.Fatalf("%d of the tenant's 5,000 records kept, want the chunk cut", attackers)
	}
	for _, p := range parts {
		if p.Name == spec.TableLedgerName("toolplane-tools", want, n) {
			t.Logf("%d of 5,000 records of the tenant kept, in %d bytes stored of %d", attackers, p.StoredSize(), spec.MaxTablePartBytes)
		}
	}
}

// BenchmarkTableLedgerEncode encodes the ledger of 50,000 names of 5,000
// owners in 64 chunks, as the operator does while 5,000 ToolSets
// converge: every chunk changed (a new encoder each time), or none (the
// encoder of the last write).
func BenchmarkTableLedgerEncode(b *testing.B) {
	tools, records := ledgerOf(50000, 5000)
	ptrs := refs(tools)
	n := spec.TableLedgerChunks(len(tools), 0)
	b.Run("every-chunk-changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := new(spec.TableLedgerEncoder).Encode(ptrs, records, "toolplane-tools", n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("none-changed", func(b *testing.B) {
		var e spec.TableLedgerEncoder
		if _, err := e.Encode(ptrs, records, "toolplane-tools", n); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Encode(ptrs, records, "toolplane-tools", n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
