package search

import (
	"encoding/json"
	"os"
	"path/filepath"
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
// tuning half of the corpus, never the held-out half, and logs the figures
// and parameters it ends at. It runs only when asked:
// SEARCH_TUNE=1 go test -run TestTune -v ./search/
// TestCrossValidate says how well parameters chosen so generalize.
func TestTune(t *testing.T) {
	if os.Getenv("SEARCH_TUNE") == "" {
		t.Skip("set SEARCH_TUNE=1 to tune")
	}
	tools, tasks := loadCorpus(t)
	tb := &spec.Table{Revision: "tune", Tools: tools}
	tune := tuningHalf(tasks)
	r5, r10, mrr := evalTasks(tb, tune)
	t.Logf("start r5=%.3f r10=%.3f mrr=%.3f", r5, r10, mrr)
	ascend(tb, tune, tuneParams(), 4)
	r5, r10, mrr = evalTasks(tb, tune)
	t.Logf("end r5=%.3f r10=%.3f mrr=%.3f weights=%v b=%v k1=%v exp=%v owner=%v exact=%v", r5, r10, mrr, fieldWeight, fieldB, bm25K1, expansionWeight, ownerWeight, exactWeight)
}
