package spec_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

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
