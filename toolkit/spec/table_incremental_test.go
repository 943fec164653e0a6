package spec_test

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestTableEncoderIncremental applies random sequences of changes to a
// table and encodes each revision with one encoder, which holds of the last
// only the gzip members and where each tool's JSON lies in them, and with a
// fresh one: the parts must be identical, after the same stored index, and
// read back as the canonical JSON of the tools. The changes edit, add,
// remove and rename tools, grow one past a chunk, shrink the table to the
// plain form and back, write it unchanged, and mix in encodings that fail
// and EncodeEntries; the tools come sorted, shuffled, or by reference.
func TestTableEncoderIncremental(t *testing.T) {
	type config struct {
		name         string
		plain, chunk int // 0: the production limits
		tools        func() []spec.TableTool
		seeds, steps uint64
	}
	configs := []config{
		{"small", 4 << 10, 16 << 10, func() []spec.TableTool { return tabletest.Tools(400) }, 3, 80},
		{"scale", 0, 0, func() []spec.TableTool { return scaleTools(4_000) }, 2, 15},
	}
	for _, cfg := range configs {
		for seed := range cfg.seeds {
			t.Run(fmt.Sprintf("%s/%d", cfg.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 0x1c2))
				newEncoder := func() *spec.TableEncoder {
					if cfg.plain == 0 {
						return new(spec.TableEncoder)
					}
					return spec.NewTableEncoderChunked(cfg.plain, cfg.chunk)
				}
				all := cfg.tools()
				tools := slices.Clone(all)
				enc := newEncoder()
				var prev *spec.TableIndex
				added := 0
				var last []spec.TablePart
				for step := range int(cfg.steps) {
					tools = mutate(r, tools, all, &added)
					if prev != nil && len(prev.Parts) > 1 && r.IntN(6) == 0 {
						// Remove the tools of one chunk, so that a held
						// segment goes whole.
						members := gunzipMembers(t, last)
						gone := map[string]bool{}
						for _, m := range toolName.FindAllSubmatch(members[1+r.IntN(len(members)-1)], -1) {
							gone[string(m[1])] = true
						}
						if len(gone) < len(tools) {
							tools = slices.DeleteFunc(tools, func(tool spec.TableTool) bool { return gone[tool.Name] })
						}
					}
					stored := spec.TableStored{Index: prev}
					if r.IntN(8) == 0 {
						// An encoding that fails leaves the encoder as it was.
						bad := append(slices.Clone(tools), tools[r.IntN(len(tools))])
						if _, err := enc.Encode(&spec.Table{Tools: bad}, "t", stored); err == nil {
							t.Fatalf("step %d: a table with a duplicate tool encoded", step)
						}
					}
					if r.IntN(8) == 0 {
						// EncodeEntries of another table, on the same encoder.
						entries, err := spec.MarshalTableEntries(&spec.Table{Tools: mutate(r, slices.Clone(tools), all, &added)})
						if err != nil {
							t.Fatal(err)
						}
						if _, err := enc.EncodeEntries(entries, "t", stored); err != nil {
							t.Fatalf("step %d: EncodeEntries: %v", step, err)
						}
					}
					var got []spec.TablePart
					var err error
					switch r.IntN(3) {
					case 0:
						got, err = enc.Encode(&spec.Table{Tools: slices.Clone(tools)}, "t", stored)
					case 1:
						shuffled := slices.Clone(tools)
						r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
						got, err = enc.Encode(&spec.Table{Tools: shuffled}, "t", stored)
					default:
						ptrs := make([]*spec.TableTool, len(tools))
						for i := range tools {
							ptrs[i] = &tools[i]
						}
						r.Shuffle(len(ptrs), func(i, j int) { ptrs[i], ptrs[j] = ptrs[j], ptrs[i] })
						got, err = enc.EncodeTools(ptrs, "t", stored)
					}
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					want, err := newEncoder().Encode(&spec.Table{Tools: slices.Clone(tools)}, "t", stored)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d, %d tools: the encoder that holds the last revision gives other parts than a fresh one", step, len(tools))
					}
					checkParts(t, got, tools)
					prev, last = nil, got
					if _, plain := got[0].Data[spec.TableKey]; !plain {
						prev = index(t, got)
					}
				}
			})
		}
	}
}

// toolName finds the names of the tools in a table's JSON.
var toolName = regexp.MustCompile(`\{"name":"([^"]+)"`)

// mutate returns tools, sorted by name, after a random change: all holds
// the tools to add back from.
func mutate(r *rand.Rand, tools, all []spec.TableTool, added *int) []spec.TableTool {
	pick := func() int { return r.IntN(len(tools)) }
	switch c := r.IntN(21); {
	case c < 6: // edit one or a few tools
		for range 1 + r.IntN(3) {
			i := pick()
			if r.IntN(2) == 0 || len(tools[i].Description) < 10 {
				tools[i].Description += " Also archived ones."
			} else {
				tools[i].Description = tools[i].Description[:len(tools[i].Description)/2]
			}
		}
	case c < 8: // a burst: a tenth of the tools
		for range len(tools)/10 + 1 {
			tools[pick()].Title = fmt.Sprintf("Title %d", r.IntN(1000))
		}
	case c < 10: // remove some
		for range 1 + r.IntN(5) {
			if len(tools) > 2 {
				i := pick()
				tools = slices.Delete(tools, i, i+1)
			}
		}
	case c < 12: // add some
		for range 1 + r.IntN(5) {
			tool := all[r.IntN(len(all))]
			*added++
			tool.Name = fmt.Sprintf("%s_new%d", tool.Name, *added)
			tools = append(tools, tool)
		}
	case c < 13: // rename one
		i := pick()
		*added++
		tools[i].Name = fmt.Sprintf("z%d_%s", *added, tools[i].Name)
	case c < 14: // one tool larger than a chunk, or back to its size
		i := pick()
		if len(tools[i].Description) > 20_000 {
			tools[i].Description = "Small again."
		} else {
			noise := make([]byte, 40<<10+r.IntN(200<<10))
			for k := range noise {
				noise[k] = byte(r.Uint32())
			}
			tools[i].Description = base64.StdEncoding.EncodeToString(noise)
		}
	case c < 15: // shrink to a few, the plain form, or grow back to all
		if len(tools) > 10 {
			tools = tools[:3+r.IntN(5)]
		} else {
			tools = slices.Clone(all)
		}
	case c < 16: // remove a run, as long as a segment or longer
		if len(tools) > 200 {
			i := pick()
			tools = slices.Delete(tools, i, min(len(tools), i+30+r.IntN(150)))
		}
	case c < 17: // remove the first or the last
		if len(tools) > 2 {
			if r.IntN(2) == 0 {
				tools = tools[1:]
			} else {
				tools = tools[:len(tools)-1]
			}
		}
	default: // unchanged
	}
	tools = slices.Clone(tools)
	spec.SortTableTools(tools)
	return slices.CompactFunc(tools, func(a, b spec.TableTool) bool { return a.Name == b.Name })
}
