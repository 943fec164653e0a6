package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestWatchGivesEntriesTheLedgersUIDs checks that the gateway takes each
// entry's owner UID from the table's ledger, which is the only place the
// table keeps it: the tasks and call limits of a ToolSet tell it from one
// deleted and created again under its name by it. A ledger-only change (the
// same tools, a new object) is applied; a chunk that does not decode leaves
// its owners without a UID and the table served.
func TestWatchGivesEntriesTheLedgersUIDs(t *testing.T) {
	const base = "toolplane-tools"
	g := New(&Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w := &tableWatch{namespace: "toolplane-system", name: base, g: g}

	tools := make([]spec.TableTool, 40)
	uids := map[string]string{}
	for i := range tools {
		set := fmt.Sprintf("set-%d", i/10)
		tools[i] = spec.TableTool{
			Name: fmt.Sprintf("%s_tool_%02d", set, i), SourceName: fmt.Sprintf("tool_%02d", i),
			InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:     spec.ObjectReference{Namespace: "apps", Name: set},
			ToolSetUID:  "uid-" + set,
			Endpoints:   &spec.Endpoints{Invoke: "http://" + set + ".apps.svc:8080/tools/x", MCP: "http://" + set + ".apps.svc:8080/mcp"},
		}
		uids[tools[i].Name] = tools[i].ToolSetUID
	}
	spec.SortTableTools(tools)
	rv := 0
	configMaps := func(tools []spec.TableTool, ledger func([]spec.TablePart) []spec.TablePart) []corev1.ConfigMap {
		t.Helper()
		parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, base)
		if err != nil {
			t.Fatal(err)
		}
		ptrs := make([]*spec.TableTool, len(tools))
		for i := range tools {
			ptrs[i] = &tools[i]
		}
		records := make([]spec.TableRecord, len(tools))
		for i := range records {
			records[i] = spec.TableRecord{Since: time.Unix(1_700_000_000, 0).UTC(), Why: "Claimed"}
		}
		chunks, err := new(spec.TableLedgerEncoder).Encode(ptrs, records, base, 1)
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.ConfigMap
		for _, p := range append(parts, ledger(chunks)...) {
			rv++
			out = append(out, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.Name, ResourceVersion: fmt.Sprint(rv)}, Data: p.Data, BinaryData: p.BinaryData})
		}
		return out
	}
	same := func(p []spec.TablePart) []spec.TablePart { return p }
	served := func() map[string]string {
		out := map[string]string{}
		for _, tt := range g.snapshot().table.Tools {
			out[tt.Name] = tt.ToolSetUID
		}
		return out
	}

	w.apply(configMaps(tools, same))
	got := served()
	if len(got) != len(tools) {
		t.Fatalf("served %d tools, want %d", len(got), len(tools))
	}
	for name, uid := range uids {
		if got[name] != uid {
			t.Fatalf("%s served with UID %q, want the ledger's %q", name, got[name], uid)
		}
	}

	// set-1 deleted and created again with the same tools: the table's
	// bytes are the same, the ledger's are not.
	again := make([]spec.TableTool, len(tools))
	copy(again, tools)
	for i := range again {
		if again[i].ToolSet.Name == "set-1" {
			again[i].ToolSetUID = "uid-set-1-again"
		}
	}
	rev := g.Revision()
	w.apply(configMaps(again, same))
	if g.Revision() != rev {
		t.Errorf("a new owner UID changed the revision served: %s, was %s", g.Revision(), rev)
	}
	for _, tt := range again {
		if got := served()[tt.Name]; got != tt.ToolSetUID {
			t.Fatalf("after set-1 was made again, %s served with UID %q, want %q", tt.Name, got, tt.ToolSetUID)
		}
	}

	// A change of the table alone (a tool's description; the ledger's
	// chunks as they were, same resourceVersions): the UIDs the ledger
	// gave stand, and it is not decoded again, as the chunks' bytes
	// swapped for some that do not decode show.
	var chunks []corev1.ConfigMap
	for _, cm := range configMaps(again, same) {
		if _, _, ok := spec.ParseTableLedgerName(base, cm.Name); ok {
			chunks = append(chunks, cm)
		}
	}
	none := func([]spec.TablePart) []spec.TablePart { return nil }
	w.apply(append(configMaps(again, none), chunks...))
	rev = g.Revision()
	changed := make([]spec.TableTool, len(again))
	copy(changed, again)
	changed[3].Description = "Changed."
	for i := range chunks {
		chunks[i].BinaryData = map[string][]byte{spec.TableLedgerChunkKey: []byte("not gzip")}
	}
	w.apply(append(configMaps(changed, none), chunks...))
	if g.Revision() == rev {
		t.Fatal("the changed table was not served")
	}
	for _, tt := range again {
		if got := served()[tt.Name]; got != tt.ToolSetUID {
			t.Fatalf("after a change of the table alone, %s served with UID %q, want %q", tt.Name, got, tt.ToolSetUID)
		}
	}

	// A new ToolSet: the publisher writes its chunk before the table, and
	// the watch may decode the chunk with the old table. The table that
	// then has its tools, the chunks unchanged, gives them its UID.
	grown := append(slices.Clone(again), spec.TableTool{
		Name: "set-9_tool_00", SourceName: "tool_00", InputSchema: json.RawMessage(`{"type":"object"}`),
		ToolSet: spec.ObjectReference{Namespace: "apps", Name: "set-9"}, ToolSetUID: "uid-set-9",
		Endpoints: &spec.Endpoints{Invoke: "http://set-9.apps.svc:8080/tools/x", MCP: "http://set-9.apps.svc:8080/mcp"},
	})
	spec.SortTableTools(grown)
	chunks = nil
	for _, cm := range configMaps(grown, same) {
		if _, _, ok := spec.ParseTableLedgerName(base, cm.Name); ok {
			chunks = append(chunks, cm)
		}
	}
	w.apply(append(configMaps(again, none), chunks...))
	w.apply(append(configMaps(grown, none), chunks...))
	if got := served()["set-9_tool_00"]; got != "uid-set-9" {
		t.Fatalf("the new ToolSet's tool served with UID %q, want uid-set-9 from the chunk read before the table had it", got)
	}

	// A chunk that does not decode: the table is served, its owners with
	// no UID.
	w.apply(configMaps(tools, func(p []spec.TablePart) []spec.TablePart {
		p[0].BinaryData = map[string][]byte{spec.TableLedgerChunkKey: []byte("not gzip")}
		return p
	}))
	got = served()
	if len(got) != len(tools) {
		t.Fatalf("with a bad ledger chunk, served %d tools, want %d", len(got), len(tools))
	}
	for name, uid := range got {
		if uid != "" {
			t.Fatalf("%s served with UID %q from a ledger that does not decode", name, uid)
		}
	}
}
