package spec_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// benchScaleTools returns n tools as make bench-scale's workloads serve
// them (scaleTools), but with the random UIDs of real ToolSets, which
// compress least of their JSON.
func benchScaleTools(n int) []spec.TableTool {
	rng := rand.New(rand.NewPCG(27, 23))
	tools := scaleTools(n)
	for i := range tools {
		if i%10 == 0 {
			tools[i].ToolSetUID = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()>>16)
		} else {
			tools[i].ToolSetUID = tools[i-1].ToolSetUID
		}
	}
	return tools
}

// partStore keeps the ConfigMaps of a table as a publisher writes them
// with no grace period (controllers' configMapTable with grace 0): a new
// chunk is added to its part, dropping the chunks no index names; then the
// base is written whole; then every part is cleared of the chunks the new
// index does not name, and deleted once empty. It counts the bytes of
// every ConfigMap written, as the API server stores them.
type partStore struct {
	cms           map[string]map[string][]byte
	bytes, writes int
}

func (s *partStore) named(base map[string][]byte) map[string]bool {
	named := map[string]bool{}
	if raw, ok := base[spec.TableIndexKey]; ok {
		idx, err := spec.ParseTableIndex(raw)
		if err != nil {
			panic(err)
		}
		for _, p := range idx.Parts {
			named[p.ConfigMap+"/"+p.Key] = true
		}
	}
	return named
}

func (s *partStore) put(name string, cm map[string][]byte) {
	s.cms[name] = cm
	s.writes++
	s.bytes += spec.TablePart{BinaryData: cm}.StoredSize()
}

func (s *partStore) write(parts []spec.TablePart) {
	if s.cms == nil {
		s.cms = map[string]map[string][]byte{}
	}
	named := s.named(s.cms[parts[0].Name])
	for _, p := range parts[1:] {
		cur := s.cms[p.Name]
		next := map[string][]byte{}
		for k, v := range cur {
			if named[p.Name+"/"+k] {
				next[k] = v
			}
		}
		maps.Copy(next, p.BinaryData)
		if !maps.EqualFunc(cur, next, func(a, b []byte) bool { return string(a) == string(b) }) {
			s.put(p.Name, next)
		}
	}
	base := map[string][]byte{}
	for k, v := range parts[0].Data {
		base[k] = []byte(v)
	}
	maps.Copy(base, parts[0].BinaryData)
	s.put(parts[0].Name, base)
	named = s.named(base)
	for _, name := range slices.Sorted(maps.Keys(s.cms)) {
		if name == parts[0].Name {
			continue
		}
		cur := s.cms[name]
		next := maps.Clone(cur)
		maps.DeleteFunc(next, func(k string, _ []byte) bool { return !named[name+"/"+k] })
		switch {
		case len(next) == 0:
			delete(s.cms, name)
		case len(next) != len(cur):
			s.put(name, next)
		}
	}
}

// stored returns the stored index.
func (s *partStore) index(b testing.TB, base string) *spec.TableIndex {
	idx, err := spec.ParseTableIndex(s.cms[base][spec.TableIndexKey])
	if err != nil {
		b.Fatal(err)
	}
	return idx
}

// BenchmarkTableWriteBytes writes the table of make bench-scale, 10,000
// tools (1,000 ToolSets) and 50,000 (5,000 ToolSets), after a change to one
// tool's description and after a burst of 5 at once, as a publisher does
// (the stored index, the encoder of the last write, no grace period), and
// reports what the API server stores for it: written-B/change, the
// ConfigMaps written per write, and the ConfigMaps the table takes.
// "packed" is the layout before tables were spread, the baseline.
//
//	go test ./spec -run '^$' -bench BenchmarkTableWriteBytes -count 6
func BenchmarkTableWriteBytes(b *testing.B) {
	for _, n := range []int{10_000, 50_000} {
		tools := benchScaleTools(n)
		for _, burst := range []int{1, 5} {
			for _, layout := range []string{"packed", "spread"} {
				b.Run(fmt.Sprintf("tools=%d/burst=%d/%s", n, burst, layout), func(b *testing.B) {
					enc := new(spec.TableEncoder)
					if layout == "packed" {
						enc = spec.NewTableEncoderPacked()
					}
					tools := slices.Clone(tools)
					s := &partStore{}
					parts, err := enc.Encode(&spec.Table{Tools: tools}, "toolplane-tools", spec.TableStored{})
					if err != nil {
						b.Fatal(err)
					}
					s.write(parts)
					s.bytes, s.writes = 0, 0
					rng := rand.New(rand.NewPCG(1, 2))
					writes, changes := 0, 0
					for b.Loop() {
						for range burst {
							i := rng.IntN(len(tools))
							tools[i].Description = fmt.Sprintf("Changed %d. %s", changes, tools[i].Description)
							changes++
						}
						parts, err := enc.Encode(&spec.Table{Tools: tools}, "toolplane-tools", spec.TableStored{Index: s.index(b, "toolplane-tools")})
						if err != nil {
							b.Fatal(err)
						}
						s.write(parts)
						writes++
					}
					b.ReportMetric(float64(s.bytes)/float64(changes), "written-B/change")
					b.ReportMetric(float64(s.writes)/float64(writes), "configmaps/write")
					b.ReportMetric(float64(len(s.cms)), "configmaps")
				})
			}
		}
	}
}

// TestSpreadTableOneChange checks the layout of a medium table, the
// 10,000 tools of make bench-scale at 1,000 ToolSets (240 KB of gzip,
// which used to sit whole in the base ConfigMap): its chunks are spread one
// to a part, and a change to one tool writes the base (the index and the
// head) and one part, each of at most 16 KiB as stored, the old chunk's
// part being deleted; the same tools and stored index always give the
// same parts.
func TestSpreadTableOneChange(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 7 MB of JSON")
	}
	tools := benchScaleTools(10_000)
	s := &partStore{}
	parts, err := new(spec.TableEncoder).Encode(&spec.Table{Tools: tools}, "toolplane-tools", spec.TableStored{})
	if err != nil {
		t.Fatal(err)
	}
	checkParts(t, parts, tools)
	idx := index(t, parts)
	if len(idx.Parts) < 16 || len(parts) != len(idx.Parts) {
		t.Fatalf("%d chunks in %d ConfigMaps; want at least 16, one to a part", len(idx.Parts), len(parts))
	}
	s.write(parts)
	enc := new(spec.TableEncoder)
	if _, err := enc.Encode(&spec.Table{Tools: tools}, "toolplane-tools", spec.TableStored{}); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{0, len(tools) / 2, len(tools) - 1} {
		tools[n].Description += " Also archived ones."
		stored := spec.TableStored{Index: s.index(t, "toolplane-tools")}
		parts, err := enc.Encode(&spec.Table{Tools: tools}, "toolplane-tools", stored)
		if err != nil {
			t.Fatal(err)
		}
		again, err := new(spec.TableEncoder).Encode(&spec.Table{Tools: tools}, "toolplane-tools", stored)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(parts, again) {
			t.Fatalf("change %d: a fresh encoder lays out the same tools and stored index otherwise", i)
		}
		checkParts(t, parts, tools)
		before := *s
		s.write(parts)
		if w := s.writes - before.writes; w > 2 {
			t.Errorf("change %d to tool %d: %d ConfigMaps written, want the base and one part", i, n, w)
		}
		if b := s.bytes - before.bytes; b > 2*16<<10 {
			t.Errorf("change %d to tool %d: %d bytes written, want at most %d", i, n, b, 2*16<<10)
		}
		for _, p := range parts {
			if sz := p.StoredSize(); sz > 16<<10 {
				t.Errorf("change %d: %s stores %d bytes, want at most %d", i, p.Name, sz, 16<<10)
			}
		}
	}
}
