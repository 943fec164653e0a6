package search

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// corpusDir is the evaluation corpus of hack/search/corpus, which the
// benchmarks and the tuner read.
const corpusDir = "../../hack/search/corpus"

type corpusTask struct {
	Task  string   `json:"task"`
	Tool  string   `json:"tool"`
	Also  []string `json:"also"`
	Split string   `json:"split"`
}

// loadCorpus reads the corpus as hack/search publishes it (one ToolSet per
// server, names under its prefix unless they start with its word).
func loadCorpus(tb testing.TB) ([]spec.TableTool, []corpusTask) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, "tools.json"))
	if err != nil {
		tb.Skipf("no corpus: %v", err)
	}
	var c struct {
		Servers []struct {
			Prefix string `json:"prefix"`
			Tools  []struct {
				Name         string            `json:"name"`
				Title        string            `json:"title"`
				Description  string            `json:"description"`
				InputSchema  json.RawMessage   `json:"inputSchema"`
				OutputSchema json.RawMessage   `json:"outputSchema"`
				Annotations  *spec.Annotations `json:"annotations"`
				Meta         map[string]any    `json:"_meta"`
			} `json:"tools"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		tb.Fatal(err)
	}
	var tools []spec.TableTool
	for _, s := range c.Servers {
		word := strings.TrimRight(strings.ToLower(s.Prefix), "_-")
		ns := strings.ReplaceAll(word, "_", "-")
		for _, t := range s.Tools {
			name := s.Prefix + t.Name
			if l := strings.ToLower(t.Name); strings.HasPrefix(l, word+"_") || strings.HasPrefix(l, word+"-") {
				name = t.Name
			}
			tools = append(tools, spec.TableTool{Name: name, SourceName: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Meta: t.Meta,
				ToolSet: spec.ObjectReference{Namespace: ns, Name: ns + "-mcp"}, Protocol: spec.ProtocolMCP})
		}
	}
	spec.SortTableTools(tools)
	b, err = os.ReadFile(filepath.Join(corpusDir, "tasks.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var f struct {
		Tasks []corpusTask `json:"tasks"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		tb.Fatal(err)
	}
	return tools, f.Tasks
}

// TestTune searches the ranking parameters by coordinate ascent on the
// tuning half of the corpus, never the held-out half. It runs only when
// asked: SEARCH_TUNE=1 go test -run TestTune -v ./search/
func TestTune(t *testing.T) {
	if os.Getenv("SEARCH_TUNE") == "" {
		t.Skip("set SEARCH_TUNE=1 to tune")
	}
	tools, tasks := loadCorpus(t)
	tb := &spec.Table{Revision: "tune", Tools: tools}
	var tune []corpusTask
	for _, k := range tasks {
		if k.Split == "tune" {
			tune = append(tune, k)
		}
	}
	eval := func() (float64, string) {
		x := New(tb, nil)
		var at5, at10 int
		var rr float64
		for _, k := range tune {
			for r, h := range x.Search(context.Background(), k.Task, Filter{Limit: 10}) {
				if n := tools[h.Index].Name; n == k.Tool || slices.Contains(k.Also, n) {
					rr += 1 / float64(r+1)
					if r < 5 {
						at5++
					}
					at10++
					break
				}
			}
		}
		n := float64(len(tune))
		r5, r10, mrr := float64(at5)/n, float64(at10)/n, rr/n
		return r5 + 0.5*r10 + 0.5*mrr, fmt.Sprintf("r5=%.3f r10=%.3f mrr=%.3f", r5, r10, mrr)
	}
	params := []struct {
		name string
		p    *float32
		vals []float32
	}{}
	for f := range numFields {
		params = append(params, struct {
			name string
			p    *float32
			vals []float32
		}{fmt.Sprintf("w%d", f), &fieldWeight[f], []float32{0, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.5, 2, 3, 4, 6}})
		params = append(params, struct {
			name string
			p    *float32
			vals []float32
		}{fmt.Sprintf("b%d", f), &fieldB[f], []float32{0, 0.2, 0.4, 0.6, 0.75, 0.9, 1}})
	}
	params = append(params, struct {
		name string
		p    *float32
		vals []float32
	}{"k1", &bm25K1, []float32{0.6, 0.9, 1.2, 1.6, 2, 3}}, struct {
		name string
		p    *float32
		vals []float32
	}{"exp", &expansionWeight, []float32{0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1}}, struct {
		name string
		p    *float32
		vals []float32
	}{"owner", &ownerWeight, []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}}, struct {
		name string
		p    *float32
		vals []float32
	}{"exact", &exactWeight, []float32{0, 0.1, 0.2, 0.3, 0.4, 0.6}})

	best, desc := eval()
	t.Logf("start %.4f %s", best, desc)
	for round := range 4 {
		improved := false
		for _, p := range params {
			orig := *p.p
			bestV := orig
			for _, v := range p.vals {
				*p.p = v
				if s, _ := eval(); s > best+1e-9 {
					best, bestV, improved = s, v, true
				}
			}
			*p.p = bestV
		}
		_, desc = eval()
		t.Logf("round %d: %.4f %s weights=%v b=%v k1=%v exp=%v owner=%v exact=%v", round, best, desc, fieldWeight, fieldB, bm25K1, expansionWeight, ownerWeight, exactWeight)
		if !improved {
			break
		}
	}
}
