package spec_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestTableLayoutError checks what a table past its segments says: how
// many it takes, and how much of its tools' JSON the segments an index
// names do hold, so that the tools of that prefix, alone, encode in them.
func TestTableLayoutError(t *testing.T) {
	const maxParts = 4
	tools := tabletest.Tools(400)
	slices.SortFunc(tools, func(a, b spec.TableTool) int { return strings.Compare(a.Name, b.Name) })
	enc := spec.NewTableEncoderChunked(4<<10, 64<<10)
	_, err := enc.Encode(&spec.Table{Tools: tools}, "t", spec.TableStored{MaxParts: maxParts})
	var le *spec.TableLayoutError
	if !errors.As(err, &le) || !errors.Is(err, spec.ErrTableTooLarge) {
		t.Fatalf("err = %v, want a *TableLayoutError that is ErrTableTooLarge", err)
	}
	entries, err := spec.MarshalTableEntries(&spec.Table{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		total += int64(len(e.JSON) + 1)
	}
	if le.MaxSegments != maxParts-1 || le.Segments <= le.MaxSegments || le.Bytes != total || le.Capacity <= 0 || le.Capacity >= le.Bytes {
		t.Fatalf("%+v: want more than %d segments, Bytes %d, 0 < Capacity < Bytes", *le, maxParts-1, total)
	}
	// The tools whose JSON the capacity holds, in order, are the first
	// segments as they were: they encode.
	var n int64
	keep := 0
	for keep < len(entries) && n+int64(len(entries[keep].JSON)+1) <= le.Capacity {
		n += int64(len(entries[keep].JSON) + 1)
		keep++
	}
	if n != le.Capacity {
		t.Fatalf("the capacity %d does not end at a tool (%d)", le.Capacity, n)
	}
	parts, err := enc.Encode(&spec.Table{Tools: tools[:keep]}, "t", spec.TableStored{MaxParts: maxParts})
	if err != nil {
		t.Fatalf("the %d tools of the capacity: %v", keep, err)
	}
	checkParts(t, parts, tools[:keep])
}

// TestMaxTableEntriesBytes checks that the tools' JSON, each with one byte
// for its separator, plus what MaxTableEntriesBytes leaves for the head and
// tail, is the table's JSON but a byte: a budget of MaxTableEntriesBytes
// keeps the table within MaxTableBytes.
func TestMaxTableEntriesBytes(t *testing.T) {
	for _, n := range []int{0, 1, 7} {
		tools := tabletest.Tools(n)
		parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "t")
		if err != nil {
			t.Fatal(err)
		}
		raw := parts[0].Data[spec.TableKey]
		entries, err := spec.MarshalTableEntries(&spec.Table{Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		var sum int
		for _, e := range entries {
			sum += len(e.JSON) + 1
		}
		frame := spec.MaxTableBytes - spec.MaxTableEntriesBytes
		if want := sum + frame - min(n, 1); len(raw) != want {
			t.Fatalf("%d tools: %d bytes of JSON, want %d (tools %d, frame %d)", n, len(raw), want, sum, frame)
		}
	}
}
