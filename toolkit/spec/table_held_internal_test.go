package spec

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// TestTableEncoderHeldCorrupt checks that an encoder whose held segments do
// not read back fails that encoding and starts afresh on the next, rather
// than failing every write after.
func TestTableEncoderHeldCorrupt(t *testing.T) {
	tools := make([]TableTool, 2_000)
	for i := range tools {
		name := fmt.Sprintf("tool%05d", i)
		tools[i] = TableTool{Name: name, SourceName: name, Description: fmt.Sprintf("Tool number %d of the table.", i),
			InputSchema: []byte(`{"type":"object"}`), ToolSet: ObjectReference{Namespace: "ns", Name: "ts"}}
	}
	enc := NewTableEncoderChunked(4<<10, 16<<10)
	if _, err := enc.Encode(&Table{Tools: tools}, "t", TableStored{}); err != nil {
		t.Fatal(err)
	}
	if len(enc.held.segs) < 3 {
		t.Fatalf("%d segments; the test wants 3 at least", len(enc.held.segs))
	}
	// Corrupt the last segment's member, on a copy: the parts returned
	// share it.
	last := &enc.held.segs[len(enc.held.segs)-1]
	z := slices.Clone(last.members[0].z)
	z[len(z)/2] ^= 0xff
	last.members = []heldMember{{sum: last.members[0].sum, z: z}}
	changed := slices.Clone(tools)
	changed[0].Description = "Changed."
	if _, err := enc.Encode(&Table{Tools: changed}, "t", TableStored{}); err == nil {
		t.Fatal("an encoding that reads back a corrupt segment succeeded")
	}
	got, err := enc.Encode(&Table{Tools: changed}, "t", TableStored{})
	if err != nil {
		t.Fatalf("the encoding after a corrupt segment: %v", err)
	}
	want, err := NewTableEncoderChunked(4<<10, 16<<10).Encode(&Table{Tools: changed}, "t", TableStored{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the encoding after a corrupt segment differs from a fresh encoder's")
	}
}
