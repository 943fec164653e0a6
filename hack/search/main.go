// Command search is the retrieval evaluation of toolkit/search on the corpus
// of hack/search/corpus (make bench-search). It prints one figure line:
//
//	tools=… queries=… recall_at_5=… recall_at_10=… mrr=… baseline_recall_at_5=…
//	p50_us=… p99_us=… index_mib=… list_bytes=… search_bytes=… tune_…=… heldout_…=…
//
// recall_at_k is the share of tasks whose tool (or an equivalent one the
// task lists) is among the first k hits; mrr is the mean reciprocal rank
// of the first such hit within the first 50 (0 when none). The baseline is
// plain BM25 over name and description (baseline.go), computed in the same
// run on the same tasks. p50_us and p99_us are the latency of one Search,
// over every task's query repeated; index_mib is the heap the index holds
// beyond the table. list_bytes is what an agent reads to find a tool by
// listing: every page of the gateway's tools/list, as JSON-RPC responses;
// search_bytes is the mean size of one search_tools response (limit 10,
// structured content and text) for a task's query. The figures of the
// tuning half (tune_…) and of the held-out half (heldout_…) follow.
//
// -misses prints the tuning half's misses at 5, for tuning; the held-out
// half's are printed only with -heldout-misses, which tuning never uses.
//
// -embed URL adds the semantic stage, as the gateway's would run it: the
// tools are embedded by the OpenAI-compatible endpoint at URL (-embed-model,
// EMBED_API_KEY) before any query, each query is embedded within
// -embed-timeout, and the rankings are fused; the line ends in semantic=1,
// its latency includes the query's embedding (cached after the first
// pass), and index_mib the tools' vectors. No endpoint is run here.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/search/embedding"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func main() {
	dir := flag.String("corpus", "hack/search/corpus", "directory of tools.json and tasks.json")
	passes := flag.Int("passes", 20, "times every query is timed")
	misses := flag.Bool("misses", false, "print the tuning half's misses at 5")
	heldoutMisses := flag.Bool("heldout-misses", false, "print the held-out half's misses at 5 too")
	embedURL := flag.String("embed", "", "base URL of an OpenAI-compatible /v1/embeddings endpoint (TEI, vLLM, Ollama): rank with the semantic stage too")
	embedModel := flag.String("embed-model", "", "the model -embed asks for")
	embedTimeout := flag.Duration("embed-timeout", 5*time.Second, "how long one query's embedding may take with -embed")
	flag.Parse()
	var opts *search.Options
	if *embedURL != "" {
		opts = &search.Options{Embedder: &embedding.OpenAI{URL: *embedURL, Model: *embedModel, APIKey: os.Getenv("EMBED_API_KEY")}, EmbedTimeout: *embedTimeout}
	}
	if err := run(*dir, *passes, *misses, *heldoutMisses, opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench-search:", err)
		os.Exit(1)
	}
}

// stats accumulates recall and reciprocal rank over tasks.
type stats struct {
	n, at5, at10 int
	rr           float64
}

func (s *stats) add(rank int) { // rank is 1-based, 0 for not found
	s.n++
	if rank > 0 {
		s.rr += 1 / float64(rank)
		if rank <= 5 {
			s.at5++
		}
		if rank <= 10 {
			s.at10++
		}
	}
}

func (s *stats) r5() float64  { return float64(s.at5) / float64(max(1, s.n)) }
func (s *stats) r10() float64 { return float64(s.at10) / float64(max(1, s.n)) }
func (s *stats) mrr() float64 { return s.rr / float64(max(1, s.n)) }

func run(dir string, passes int, misses, heldoutMisses bool, opts *search.Options) error {
	t, err := loadTable(dir)
	if err != nil {
		return err
	}
	tasks, err := loadTasks(dir, t)
	if err != nil {
		return err
	}

	before := heap()
	x := search.New(t, opts)
	if opts != nil {
		// The tools' vectors, off the clock, as the gateway computes them
		// off the request path.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		err := x.Embed(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("embedding the tools: %w", err)
		}
	}
	indexBytes := heap() - before // with -embed, the tools' vectors too
	base := newBaseline(t)

	ctx := context.Background()
	rankOf := func(k task, idx []int) int {
		for r, i := range idx {
			if name := t.Tools[i].Name; name == k.Tool || slices.Contains(k.Also, name) {
				return r + 1
			}
		}
		return 0
	}
	var all, tune, held, ball, btune, bheld stats
	for _, k := range tasks {
		hits := x.Search(ctx, k.Task, search.Filter{Limit: search.MaxLimit})
		idx := make([]int, len(hits))
		for j, h := range hits {
			idx[j] = h.Index
		}
		r, br := rankOf(k, idx), rankOf(k, base.search(k.Task, search.MaxLimit))
		all.add(r)
		ball.add(br)
		if k.Split == "tune" {
			tune.add(r)
			btune.add(br)
		} else {
			held.add(r)
			bheld.add(br)
		}
		if (r == 0 || r > 5) && (misses && k.Split == "tune" || heldoutMisses) {
			var top []string
			for _, i := range idx[:min(5, len(idx))] {
				top = append(top, t.Tools[i].Name)
			}
			fmt.Fprintf(os.Stderr, "miss [%s] rank %d (baseline %d) %q want %s; got %s\n", k.Split, r, br, k.Task, k.Tool, strings.Join(top, " "))
		}
	}

	// Latency: every query, passes times, after a warm-up pass.
	for _, k := range tasks {
		x.Search(ctx, k.Task, search.Filter{})
	}
	lat := make([]time.Duration, 0, passes*len(tasks))
	for range passes {
		for _, k := range tasks {
			start := time.Now()
			x.Search(ctx, k.Task, search.Filter{})
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}

	listBytes, err := listBytes(t)
	if err != nil {
		return err
	}
	var searchBytes int
	for _, k := range tasks {
		n, err := searchToolsBytes(t, k.Task, x.Search(ctx, k.Task, search.Filter{}))
		if err != nil {
			return err
		}
		searchBytes += n
	}
	runtime.KeepAlive(x)
	semantic := ""
	if opts != nil {
		semantic = " semantic=1" // the figures fuse the embeddings' ranking
	}

	fmt.Printf("tools=%d queries=%d recall_at_5=%.3f recall_at_10=%.3f mrr=%.3f baseline_recall_at_5=%.3f p50_us=%.1f p99_us=%.1f index_mib=%.2f list_bytes=%d search_bytes=%d"+
		" baseline_recall_at_10=%.3f baseline_mrr=%.3f tune_queries=%d tune_recall_at_5=%.3f tune_recall_at_10=%.3f tune_mrr=%.3f tune_baseline_recall_at_5=%.3f"+
		" heldout_queries=%d heldout_recall_at_5=%.3f heldout_recall_at_10=%.3f heldout_mrr=%.3f heldout_baseline_recall_at_5=%.3f%s\n",
		len(t.Tools), len(tasks), all.r5(), all.r10(), all.mrr(), ball.r5(), pct(0.50), pct(0.99), float64(indexBytes)/(1<<20), listBytes, searchBytes/len(tasks),
		ball.r10(), ball.mrr(), tune.n, tune.r5(), tune.r10(), tune.mrr(), btune.r5(),
		held.n, held.r5(), held.r10(), held.mrr(), bheld.r5(), semantic)
	return nil
}

// heap is the live heap after a collection.
func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// rpc is a JSON-RPC response as an agent reads it.
type rpc struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Result  any    `json:"result"`
}

// listBytes is the size of every tools/list page the gateway serves for t
// (pages of its default 500 tools), as JSON-RPC responses.
func listBytes(t *spec.Table) (int, error) {
	const page = 500
	total := 0
	for start := 0; start < len(t.Tools); start += page {
		res := &mcp.ListToolsResult{}
		for _, tool := range t.Tools[start:min(len(t.Tools), start+page)] {
			res.Tools = append(res.Tools, server.MCPTool(spec.Tool{
				Name: tool.Name, Title: tool.Title, Description: tool.Description,
				InputSchema: tool.InputSchema, OutputSchema: tool.OutputSchema,
				Annotations: tool.Annotations, Meta: tool.Meta,
			}))
		}
		if start+page < len(t.Tools) {
			res.NextCursor = "x"
		}
		b, err := json.Marshal(rpc{"2.0", start/page + 1, res})
		if err != nil {
			return 0, err
		}
		total += len(b)
	}
	return total, nil
}

// searchToolsBytes is the size of the JSON-RPC response of one
// search_tools call as /mcp/search answers it: the hits as structured
// content (table entries with scores) and as a text listing of one line
// per tool, with its parameters.
func searchToolsBytes(t *spec.Table, q string, hits []search.Hit) (int, error) {
	type entry struct {
		spec.TableTool
		Score float64 `json:"score"`
	}
	structured := struct {
		Revision   string  `json:"revision"`
		Tools      []entry `json:"tools"`
		TTLMs      int     `json:"ttlMs"`
		CacheScope string  `json:"cacheScope"`
	}{Revision: t.Revision, TTLMs: 5000, CacheScope: "private"}
	var text strings.Builder
	fmt.Fprintf(&text, "%d tools for %q, best first. Call one with call_tool {\"name\": …, \"arguments\": {…}}.\n", len(hits), q)
	for k, h := range hits {
		tool := t.Tools[h.Index]
		structured.Tools = append(structured.Tools, entry{tool, h.Score})
		desc, _, _ := strings.Cut(strings.TrimSpace(tool.Description), "\n")
		fmt.Fprintf(&text, "%d. %s(%s): %s [%s]\n", k+1, tool.Name, params(tool.InputSchema), clip(desc, 240), tool.ToolSet)
	}
	sc, err := json.Marshal(structured)
	if err != nil {
		return 0, err
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, StructuredContent: json.RawMessage(sc)}
	b, err := json.Marshal(rpc{"2.0", 1, res})
	return len(b), err
}

func params(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	var parts []string
	for n, p := range s.Properties {
		parts = append(parts, fmt.Sprintf("%s: %v", n, p.Type))
		if len(parts) == 8 {
			break
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
