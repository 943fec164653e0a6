package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// benchDocument is the spec document one workload of make bench-scale
// serves: n tools with a small object schema each, named <prefix>00, ….
func benchDocument(b *testing.B, prefix string, n int) []byte {
	b.Helper()
	doc := spec.Document{SchemaVersion: spec.SchemaVersion, Tools: make([]spec.Tool, n)}
	for j := range doc.Tools {
		doc.Tools[j] = spec.Tool{
			Name:        fmt.Sprintf("%s%02d", prefix, j),
			Description: fmt.Sprintf("Looks up records of kind %d; returns at most limit matches.", j),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"]}`),
			Annotations: &spec.Annotations{ReadOnlyHint: ptrTo(true)},
		}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkReconcilerMemory measures what the operator keeps per ToolSet
// between rounds, outside the informers' caches: the reconciler's memory
// (each Pod's last document, the last assembly, the held tools, the
// contract baseline), the publisher's claim and the tool gauges. It runs
// the steps of Reconcile after the scrapes, without an API server, for
// 5,000 ToolSets of one Pod and 10 tools each (make bench-scale's shape):
// a first round that parses, assembles and offers, then a round of 304s.
// "shared" points the parsed tools at the values other documents hold
// alike, as a scrape does (sharedValues); "unshared", the baseline in the
// same run, keeps each document's own copies, as scrapes did before.
// Run with
// go test ./controllers -run '^$' -bench ReconcilerMemory -benchtime 1x -count 5
// and RECONCILER_HEAP_PROFILE=path (with -memprofilerate 512) for a heap
// profile of what is held.
func BenchmarkReconcilerMemory(b *testing.B) {
	const toolSets, tools = 5000, 10
	bodies := make([][]byte, toolSets)
	for i := range bodies {
		bodies[i] = benchDocument(b, fmt.Sprintf("ts%04d_", i), tools)
	}
	for _, share := range []bool{false, true} {
		b.Run(map[bool]string{false: "unshared", true: "shared"}[share], func(b *testing.B) {
			reconcilerMemory(b, bodies, share)
		})
	}
}

func reconcilerMemory(b *testing.B, bodies [][]byte, share bool) {
	toolSets := len(bodies)
	ctx := context.Background()
	now := time.Now()
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)

		p := loadedPublisher(&TablePublisher{})
		r := &ToolSetReconciler{Publisher: p}
		r.init()
		for i := range toolSets {
			memoryRounds(ctx, b, r, p, i, bodies[i], share, now)
		}

		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(toolSets), "B/toolset")
		if path := os.Getenv("RECONCILER_HEAP_PROFILE"); path != "" {
			// Where the bytes go, by allocation site, while they are held:
			// go tool pprof -sample_index=inuse_space -top controllers.test $path
			writeHeapProfile(b, path)
		}
		runtime.KeepAlive(p)
		runtime.KeepAlive(r)
		for key := range r.memory {
			forgetTools(key)
		}
	}
}

// memoryRounds runs ToolSet i of BenchmarkReconcilerMemory through the
// steps of Reconcile after the scrapes, twice (a first round that parses
// body, then a round of 304s), and returns it with the status they set.
func memoryRounds(ctx context.Context, b *testing.B, r *ToolSetReconciler, p *TablePublisher, i int, body []byte, share bool, now time.Time) *v1alpha1.ToolSet {
	b.Helper()
	ts := &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%04d", i/100), Name: fmt.Sprintf("ts-%04d", i), Generation: 1,
			CreationTimestamp: metav1.NewTime(now)},
		Spec: v1alpha1.ToolSetSpec{
			Port:    intstr.FromString("http"),
			Service: &v1alpha1.ServiceReference{Name: fmt.Sprintf("svc-%04d", i), Port: 8080},
		},
	}
	key := types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Name + "-pod", UID: types.UID(fmt.Sprintf("uid-%d", i))}}
	mem := r.memoryOf(key, ts.UID)
	var doc *spec.Document
	for round := range 2 {
		if round == 0 {
			var err error
			if doc, err = ParseDocument(body); err != nil {
				b.Fatal(err)
			}
			if share {
				toolValues.share(doc.Tools)
			}
		}
		// A 304 answers with the last document.
		results := []podResult{{pod: pod, url: "http://127.0.0.1:8080/.well-known/toolplane/spec.json", doc: doc}}
		rd := newRound([]*corev1.Pod{pod}, results, nil, mem.pods)
		mem.remember(results)
		a := mem.assemble(ts, rd.docs, rd.blind, defaultToolBounds, "")
		mem.held, mem.heldRevision = a.tools, a.revision
		verdicts, err := p.Offer(ctx, Offer{ToolSet: key, Created: ts.CreationTimestamp, Tools: a.tools})
		if err != nil {
			b.Fatal(err)
		}
		prev := ts.Status.Tools
		r.setStatus(ts, rd, a, a.tools, verdicts, false, mem)
		cr, err := r.checkContracts(ctx, ts, prev, a.tools, true, mem, now)
		if err != nil {
			b.Fatal(err)
		}
		r.commitContracts(ts, mem, cr)
		recordTools(key, ts.Status.Tools)
	}
	return ts
}

// BenchmarkToolSetCacheMemory measures what the informer's cache keeps of
// each ToolSet of BenchmarkReconcilerMemory once the reconciler has
// written its status (10 tools Published and the conditions): its JSON, as
// the API server sends it, decoded and put through the cache's transform,
// for 5,000 ToolSets. "trimmed" drops what TrimToolSetForCache dropped
// before its words were shared (the baseline, in the same run), "shared"
// is TrimToolSetForCache.
//
//	go test ./controllers -run '^$' -bench ToolSetCacheMemory -benchtime 1x -count 6
func BenchmarkToolSetCacheMemory(b *testing.B) {
	const toolSets, tools = 5000, 10
	ctx := context.Background()
	now := time.Now()
	p := loadedPublisher(&TablePublisher{})
	r := &ToolSetReconciler{Publisher: p}
	r.init()
	bodies := make([][]byte, toolSets)
	for i := range bodies {
		ts := memoryRounds(ctx, b, r, p, i, benchDocument(b, fmt.Sprintf("ts%04d_", i), tools), true, now)
		ts.UID = types.UID(fmt.Sprintf("8c5d2a4e-0000-4000-8000-%012d", i))
		ts.ResourceVersion = strconv.Itoa(100000 + i)
		var err error
		if bodies[i], err = json.Marshal(ts); err != nil {
			b.Fatal(err)
		}
	}
	for key := range r.memory {
		forgetTools(key)
	}
	// r and p are dead from here: what they hold is garbage to the
	// measurements below.
	for _, mode := range []string{"trimmed", "shared"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				cached := make([]any, toolSets)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i, body := range bodies {
					ts := &v1alpha1.ToolSet{}
					if err := json.Unmarshal(body, ts); err != nil {
						b.Fatal(err)
					}
					if mode == "trimmed" {
						cached[i] = trimToolSet(ts)
					} else {
						cached[i], _ = TrimToolSetForCache(ts)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/toolSets, "B/toolset")
				runtime.KeepAlive(cached)
			}
		})
	}
}

func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
