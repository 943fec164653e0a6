package search

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// syntheticTable is n tools made from the corpus' real ones: copy c of a
// tool is published by a ToolSet of namespace team-c under the name with
// suffix _c, the way a cluster runs the same servers for many teams.
func syntheticTable(tb testing.TB, n int) (*spec.Table, []corpusTask) {
	tools, tasks := loadCorpus(tb)
	out := make([]spec.TableTool, 0, n)
	for c := 0; len(out) < n; c++ {
		for _, t := range tools {
			if len(out) == n {
				break
			}
			if c > 0 {
				t.Name = fmt.Sprintf("%s_%d", t.Name, c)
				t.ToolSet.Namespace = fmt.Sprintf("team-%d", c)
			}
			out = append(out, t)
		}
	}
	spec.SortTableTools(out)
	return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(out), Tools: out}, tasks
}

var sizes = []int{1000, 10000, 50000}

// BenchmarkSearch is one query, default limit, cycling through the
// corpus' tasks, on tables of 1,000 to 50,000 tools.
func BenchmarkSearch(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			t, tasks := syntheticTable(b, n)
			x := New(t, nil)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				x.Search(ctx, tasks[i%len(tasks)].Task, Filter{})
				i++
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkBuild is a full build of a table revision; index-bytes is the
// heap the index holds beyond the table.
func BenchmarkBuild(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			t, _ := syntheticTable(b, n)
			size := indexBytes(func() any { return New(t, nil) })
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				New(t, nil)
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(size), "index-bytes")
		})
	}
}

// BenchmarkUpdate is the index of a revision that changed one tool's
// description, made from the last revision's index: compare with
// BenchmarkBuild at the same size.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			t, _ := syntheticTable(b, n)
			x := New(t, nil)
			revs := make([]*spec.Table, 2)
			for k := range revs {
				tools := append([]spec.TableTool(nil), t.Tools...)
				tools[n/2].Description = fmt.Sprintf("changed in revision %d", k)
				revs[k] = &spec.Table{Revision: fmt.Sprintf("r%d", k), Tools: tools}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				x.Update(revs[i%2])
				i++
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkEncodeList is the baseline a query is measured against: JSON
// encoding every tool of the table once, as a full tools/list (or GET
// /v1/tools) does.
func BenchmarkEncodeList(b *testing.B) {
	for _, n := range sizes[:2] {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			t, _ := syntheticTable(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				if _, err := json.Marshal(t.Tools); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// indexBytes is the live heap that what build returns holds.
func indexBytes(build func() any) int64 {
	live := func() int64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := live()
	v := build()
	after := live()
	runtime.KeepAlive(v)
	return after - before
}

// reportCPU reports the process' CPU time per operation since start.
func reportCPU(b *testing.B, start int64) {
	if start > 0 && b.N > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}
