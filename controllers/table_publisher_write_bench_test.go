package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// BenchmarkTableWrite measures what one table write costs the publisher in
// a cluster of 5,000 ToolSets of 10 tools each (make bench-scale's shape,
// about 600 bytes of JSON a tool): one ToolSet changes one tool, and the
// table is built and encoded after the stored index, with the encoder of
// the previous write, as TablePublisher.flush does, less the API server.
// Run with
// go test ./controllers -run '^$' -bench TableWrite -benchmem -count 6
func BenchmarkTableWrite(b *testing.B) {
	const toolSets, tools = 5000, 10
	ctx := context.Background()
	p := &TablePublisher{}
	p.init()
	close(p.loaded)
	desc := strings.Repeat("Reads one record of the service and returns it. ", 8)
	offers := make([]Offer, toolSets)
	for i := range offers {
		ts := types.NamespacedName{Namespace: fmt.Sprintf("ns-%04d", i/100), Name: fmt.Sprintf("ts-%04d", i)}
		o := Offer{ToolSet: ts, Created: metav1.Unix(int64(i), 0)}
		for j := range tools {
			name := fmt.Sprintf("ts%04d_tool_%02d", i, j)
			o.Tools = append(o.Tools, spec.TableTool{Name: name, SourceName: fmt.Sprintf("tool_%02d", j), Description: desc,
				ToolSet:     spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name},
				InputSchema: []byte(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)})
		}
		offers[i] = o
		if _, err := p.Offer(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	changed := offers[toolSets/2]
	changed.Tools = slices.Clone(changed.Tools)
	changed.Tools[tools/2].Description += " Also archived ones."
	variants := []Offer{offers[toolSets/2], changed}

	enc := new(spec.TableEncoder)
	var prev *spec.TableIndex
	write := func() {
		parts, err := benchWriteTable(p, enc, prev)
		if err != nil {
			b.Fatal(err)
		}
		if prev, err = spec.ParseTableIndex([]byte(parts[0].Data[spec.TableIndexKey])); err != nil {
			b.Fatal(err)
		}
	}
	write()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := p.Offer(ctx, variants[(i+1)%2]); err != nil {
			b.Fatal(err)
		}
		write()
	}
}

// benchWriteTable builds and encodes the table as TablePublisher.flush
// does, without the API server.
func benchWriteTable(p *TablePublisher, enc *spec.TableEncoder, prev *spec.TableIndex) ([]spec.TablePart, error) {
	entries, _ := p.table()
	return enc.EncodeEntries(entries, DefaultTableName, spec.TableStored{Index: prev})
}

// TestTableEntriesJSON checks that the entries a publisher hands the
// encoder are each tool's json.Marshal, as the claims keep them, and that an
// offer whose tool does not encode is refused.
func TestTableEntriesJSON(t *testing.T) {
	p := &TablePublisher{}
	p.init()
	close(p.loaded)
	ctx := context.Background()
	var want []spec.TableTool
	for i, ns := range []string{"b", "a"} {
		ts := types.NamespacedName{Namespace: ns, Name: "tools"}
		o := Offer{ToolSet: ts, Created: metav1.Unix(int64(i), 0), Tools: []spec.TableTool{
			{Name: ns + "_search", SourceName: "search", Description: "Finds <things> & more", InputSchema: []byte(`{ "type": "object" }`)},
			{Name: ns + "_get", SourceName: "get"},
		}}
		if _, err := p.Offer(ctx, o); err != nil {
			t.Fatal(err)
		}
		for _, tool := range o.Tools {
			tool.ToolSet = spec.ObjectReference{Namespace: ns, Name: "tools"}
			want = append(want, tool)
		}
	}
	spec.SortTableTools(want)
	entries, ok := p.table()
	if !ok || len(entries) != len(want) {
		t.Fatalf("table has %d entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		js, err := json.Marshal(&want[i])
		if err != nil {
			t.Fatal(err)
		}
		if e.Name != want[i].Name || string(e.JSON) != string(js) {
			t.Errorf("entry %d is %s %s, want %s %s", i, e.Name, e.JSON, want[i].Name, js)
		}
	}

	bad := Offer{ToolSet: types.NamespacedName{Namespace: "c", Name: "tools"}, Tools: []spec.TableTool{{Name: "c_bad", InputSchema: []byte(`{`)}}}
	if _, err := p.Offer(ctx, bad); !errors.Is(err, ErrInvalidOffer) {
		t.Errorf("an offer whose tool does not encode: %v, want ErrInvalidOffer", err)
	}
}
