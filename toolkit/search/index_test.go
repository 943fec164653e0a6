package search

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func ptr[T any](v T) *T { return &v }

func tool(ns, set, name, desc, schema string) spec.TableTool {
	if schema == "" {
		schema = `{"type":"object"}`
	}
	return spec.TableTool{Name: name, SourceName: name, Description: desc, InputSchema: json.RawMessage(schema),
		ToolSet: spec.ObjectReference{Namespace: ns, Name: set}}
}

func table(tools ...spec.TableTool) *spec.Table {
	spec.SortTableTools(tools)
	return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}
}

func sampleTable() *spec.Table {
	ro := tool("crm", "crm-tools", "crm_query_customer", "Look up a customer record by email address.",
		`{"type":"object","properties":{"email":{"type":"string","description":"The customer's e-mail"}}}`)
	ro.Annotations = &spec.Annotations{ReadOnlyHint: ptr(true)}
	del := tool("crm", "crm-tools", "crm_deleteCustomer", "Remove a customer permanently.", "")
	del.Annotations = &spec.Annotations{DestructiveHint: ptr(true)}
	gh := tool("dev", "github", "github.create_issue", "Open a new issue in a repository.",
		`{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string","enum":["bug","enhancement"]}}}}`)
	gh.Meta = map[string]any{CategoryMeta: "Issue-Tracking"}
	fs := tool("dev", "files", "read_text_file", "Read the complete contents of a file as text.",
		`{"type":"object","properties":{"path":{"type":"string"}}}`)
	fs.Annotations = &spec.Annotations{ReadOnlyHint: ptr(true)}
	return table(ro, del, gh, fs, tool("ops", "k8s", "scale-deployment", "Change the number of replicas of a Deployment.", ""))
}

func names(t *spec.Table, hits []Hit) []string {
	out := []string{}
	for _, h := range hits {
		out = append(out, t.Tools[h.Index].Name)
	}
	return out
}

func TestSearchRanksTheToolATaskNeeds(t *testing.T) {
	tb := sampleTable()
	x := New(tb, nil)
	if x.Len() != 5 || x.Revision() != tb.Revision {
		t.Fatalf("Len %d Revision %q", x.Len(), x.Revision())
	}
	for q, want := range map[string]string{
		"find the customer with this email": "crm_query_customer",
		"delete a customer":                 "crm_deleteCustomer",  // camelCase split, stemmed
		"report a bug in my repositories":   "github.create_issue", // enum value, stem of repositories
		"show me what is in this file":      "read_text_file",
		"scale up replicas":                 "scale-deployment",
		"issue tracking":                    "github.create_issue", // category
	} {
		hits := x.Search(context.Background(), q, Filter{})
		if got := names(tb, hits); len(got) == 0 || got[0] != want {
			t.Errorf("%q: got %v, want %s first", q, got, want)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Errorf("%q: hits not best first: %v", q, hits)
			}
		}
	}
}

func TestSearchWithoutWordsHasNoHits(t *testing.T) {
	x := New(sampleTable(), nil)
	for _, q := range []string{"", "   ", "the of and", "___"} {
		if hits := x.Search(context.Background(), q, Filter{}); len(hits) != 0 {
			t.Errorf("%q: %v", q, hits)
		}
	}
	if hits := New(nil, nil).Search(context.Background(), "customer", Filter{}); len(hits) != 0 {
		t.Errorf("empty index: %v", hits)
	}
}

func TestFilters(t *testing.T) {
	tb := sampleTable()
	x := New(tb, nil)
	q := "customer file issue replicas"
	for name, c := range map[string]struct {
		f    Filter
		want []string
	}{
		"namespace":       {Filter{Namespace: "crm"}, []string{"crm_deleteCustomer", "crm_query_customer"}},
		"toolset":         {Filter{ToolSet: &spec.ObjectReference{Namespace: "dev", Name: "files"}}, []string{"read_text_file"}},
		"read only":       {Filter{ReadOnly: ptr(true)}, []string{"crm_query_customer", "read_text_file"}},
		"not destructive": {Filter{Destructive: ptr(false)}, []string{"crm_query_customer", "read_text_file"}},
		"destructive":     {Filter{Destructive: ptr(true)}, []string{"crm_deleteCustomer", "github.create_issue", "scale-deployment"}},
		"category":        {Filter{Category: "issue-tracking"}, []string{"github.create_issue"}},
		"limit":           {Filter{Limit: 1, Namespace: "dev", ToolSet: &spec.ObjectReference{Namespace: "dev", Name: "github"}}, []string{"github.create_issue"}},
	} {
		got := names(tb, x.Search(context.Background(), q, c.f))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", name, got, c.want)
		}
	}
}

func TestAllowIsAskedBestFirstUntilTheLimit(t *testing.T) {
	tb := sampleTable()
	x := New(tb, nil)
	q := "customer file issue replicas"
	all := x.Search(context.Background(), q, Filter{})
	if len(all) != 5 {
		t.Fatalf("want every tool to match, got %v", names(tb, all))
	}
	var asked []int
	hits := x.Search(context.Background(), q, Filter{Limit: 2, Allow: func(i int) bool {
		asked = append(asked, i)
		return i != all[0].Index // deny the best
	}})
	if want := []int{all[0].Index, all[1].Index, all[2].Index}; !slices.Equal(asked, want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	if len(hits) != 2 || hits[0].Index != all[1].Index || hits[1].Index != all[2].Index {
		t.Errorf("hits %v, want the 2nd and 3rd of %v", hits, all)
	}
	// Filtered-out tools are never asked about.
	asked = nil
	x.Search(context.Background(), q, Filter{Namespace: "ops", Allow: func(i int) bool { asked = append(asked, i); return true }})
	if len(asked) != 1 || tb.Tools[asked[0]].ToolSet.Namespace != "ops" {
		t.Errorf("asked %v", asked)
	}
}

func TestLimitIsCapped(t *testing.T) {
	var tools []spec.TableTool
	for i := range 80 {
		tools = append(tools, tool("ns", "s", "tool_"+string(rune('a'+i/26))+string(rune('a'+i%26)), "Send a message.", ""))
	}
	x := New(table(tools...), nil)
	if n := len(x.Search(context.Background(), "send message", Filter{Limit: 1000})); n != MaxLimit {
		t.Errorf("limit 1000: %d hits", n)
	}
	if n := len(x.Search(context.Background(), "send message", Filter{})); n != DefaultLimit {
		t.Errorf("default limit: %d hits", n)
	}
}

func TestUpdateFollowsTheTable(t *testing.T) {
	tb := sampleTable()
	x := New(tb, nil)
	tools := slices.Clone(tb.Tools)
	tools = slices.DeleteFunc(tools, func(t spec.TableTool) bool { return t.Name == "read_text_file" })
	tools = append(tools, tool("dev", "files", "write_file", "Create or overwrite a file with new content.", ""))
	tb2 := table(tools...)
	y := x.Update(tb2)
	if y.Revision() != tb2.Revision || y.Len() != 5 {
		t.Fatalf("Revision %q Len %d", y.Revision(), y.Len())
	}
	for _, h := range y.Search(context.Background(), "read file contents", Filter{}) {
		if tb2.Tools[h.Index].Name == "read_text_file" {
			t.Errorf("removed tool returned")
		}
	}
	if got := names(tb2, y.Search(context.Background(), "overwrite a file", Filter{})); len(got) == 0 || got[0] != "write_file" {
		t.Errorf("new tool not found first: %v", got)
	}
	// The old index is unchanged.
	if got := names(tb, x.Search(context.Background(), "read file contents", Filter{})); len(got) == 0 || got[0] != "read_text_file" {
		t.Errorf("old index changed: %v", got)
	}
	if x.Update(tb) != x {
		t.Errorf("an update to the same revision is not a no-op")
	}
}

func TestWords(t *testing.T) {
	for in, want := range map[string][]string{
		"github.create_issue":   {"github", "create", "issue"},
		"getHTTPResponseCode":   {"get", "HTTP", "Response", "Code", "getHTTPResponseCode"},
		"GitLab MongoDB":        {"Git", "Lab", "GitLab", "Mongo", "DB", "MongoDB"},
		"s3-list-buckets":       {"s3", "list", "buckets"},
		"browser_navigate_back": {"browser", "navigate", "back"},
		"ABC":                   {"ABC"},
		"naïveÜber":             {"naïve", "Über", "naïveÜber"},
	} {
		var got []string
		words(in, func(w string) { got = append(got, w) })
		if !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	var got []string
	wholeWords("file a GitLab issue_now", func(w string) { got = append(got, w) })
	if want := []string{"file", "a", "GitLab", "issue", "now"}; !slices.Equal(got, want) {
		t.Errorf("wholeWords: %q, want %q", got, want)
	}
}

// A URL in a task is "url", not the words of its host and path, and a
// number is the user's data: neither ranks a tool that merely says them.
func TestURLsAndNumbersAreTheUsersData(t *testing.T) {
	tb := table(
		tool("web", "web", "web_fetch", "Fetch a URL and return its content as markdown.", ""),
		tool("billing", "billing", "billing_pricing", "Pricing of the example plans, from 1 to 3 seats.", ""),
	)
	x := New(tb, nil)
	if got := names(tb, x.Search(context.Background(), "get https://example.com/pricing for plan 3", Filter{})); len(got) == 0 || got[0] != "web_fetch" {
		t.Errorf("got %v, want web_fetch first", got)
	}
	if got := x.Search(context.Background(), "17 2.3 #99", Filter{}); len(got) != 0 {
		t.Errorf("numbers only: %v, want no hits", got)
	}
}

// Two words in a row are searched for as one too, and quoted text is the
// user's data.
func TestCompoundsAndQuotes(t *testing.T) {
	tb := table(
		tool("chart", "chart", "chart_boxplot", "Draw a boxplot of the values.", ""),
		tool("chart", "chart", "chart_box_fill", "Fill a box of the plot area with a colour.", ""),
		tool("web", "web", "web_type", "Type text into an input field.", ""),
		tool("issues", "issues", "issues_create_issue", "Create an issue with a title.", ""),
	)
	x := New(tb, nil)
	for q, want := range map[string]string{
		"show the values as a box plot":                      "chart_boxplot",
		`type "create an issue titled crash" into the field`: "web_type",
	} {
		if got := names(tb, x.Search(context.Background(), q, Filter{})); len(got) == 0 || got[0] != want {
			t.Errorf("%q: got %v, want %s first", q, got, want)
		}
	}
	if got := unquote(`say "hi" and "bye`); got != `say "  and "bye` {
		t.Errorf("unquote: %q", got)
	}
}

// A product written in camelCase is one word of the query: "GitLab" is not
// "git" and "lab", which would rank a tool that says "Git" and "lab"
// (or GitHub's) above the one of the ToolSet named gitlab.
func TestCamelCaseQueryWordIsWhole(t *testing.T) {
	tb := table(
		tool("gitlab", "gitlab", "gitlab_create_issue", "Create a new issue in a project.", ""),
		tool("github", "github", "github_create_issue", "Create a new issue in a Git repository.", ""),
		tool("lab", "lab", "lab_create_issue", "Create an issue for a lab sample.", ""),
	)
	x := New(tb, nil)
	if got := names(tb, x.Search(context.Background(), "create an issue in GitLab", Filter{})); len(got) == 0 || got[0] != "gitlab_create_issue" {
		t.Errorf("got %v, want gitlab_create_issue first", got)
	}
}

// candidates returns every tool of x that q matches, by table index: Allow
// refusing every candidate is asked about all of them.
func candidates(x *Index, q string) map[int]bool {
	out := map[int]bool{}
	x.Search(context.Background(), q, Filter{Allow: func(i int) bool { out[i] = true; return false }})
	return out
}

func TestUpdateMatchesAFullBuild(t *testing.T) {
	words := []string{"customer", "invoice", "file", "issue", "deploy", "branch", "query", "message", "calendar", "browser"}
	rnd := uint64(1)
	next := func(n int) int { rnd = rnd*6364136223846793005 + 1442695040888963407; return int(rnd>>33) % n }
	mk := func(k int) spec.TableTool {
		desc := words[next(len(words))] + " " + words[next(len(words))] + " records"
		return tool("ns"+string(rune('a'+k%3)), "set", "tool_"+string(rune('a'+k/26%26))+string(rune('a'+k%26)), desc,
			`{"type":"object","properties":{"`+words[next(len(words))]+`_id":{"type":"string"}}}`)
	}
	var tools []spec.TableTool
	for k := range 300 {
		tools = append(tools, mk(k))
	}
	x := New(table(slices.Clone(tools)...), nil)
	for step := range 120 {
		switch next(3) {
		case 0: // remove one
			i := next(len(tools))
			tools = slices.Delete(tools, i, i+1)
		case 1: // change one
			i := next(len(tools))
			tools[i].Description = words[next(len(words))] + " changed"
		default: // add one
			tools = append(tools, mk(300+step))
		}
		tb := table(slices.Clone(tools)...)
		y := x.Update(tb)
		full := New(tb, nil)
		if y.Len() != len(tb.Tools) {
			t.Fatalf("step %d: Len %d, want %d", step, y.Len(), len(tb.Tools))
		}
		for _, w := range words {
			got, want := candidates(y, w), candidates(full, w)
			if !maps.Equal(got, want) {
				t.Fatalf("step %d, %q: update matches %v, a full build %v", step, w, got, want)
			}
		}
		if step < 20 && y.base != x.base {
			t.Fatalf("step %d: a one-tool change rebuilt the index", step)
		}
		x = y
	}
}

// An index is shared by every request of a revision: searches from many
// goroutines, with filters and Allow, while the next revisions are built
// from it, agree with a search made alone (go test -race checks the rest).
func TestConcurrentUse(t *testing.T) {
	tb := sampleTable()
	x := New(tb, nil)
	want := names(tb, x.Search(context.Background(), "customer file issue replicas", Filter{}))
	done := make(chan struct{})
	errs := make(chan string, 64)
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 300 {
				got := names(tb, x.Search(context.Background(), "customer file issue replicas", Filter{Allow: func(int) bool { return true }}))
				if !slices.Equal(got, want) {
					errs <- fmt.Sprintf("goroutine %d, search %d: %v, want %v", g, i, got, want)
					return
				}
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		y := x
		for i := range 100 {
			tools := slices.Clone(tb.Tools)
			tools[i%len(tools)].Description = fmt.Sprintf("changed %d", i)
			y = y.Update(&spec.Table{Revision: fmt.Sprint(i), Tools: tools})
			y.Search(context.Background(), "changed", Filter{})
		}
	}()
	for range 9 {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A word's synonyms are one concept with it: a tool that holds many of
// them is not worth more than one that holds the word and the task's other
// word too.
func TestSynonymsCountOnce(t *testing.T) {
	tb := table(
		tool("a", "store", "records_cleanup", "Remove, erase, drop, purge, discard or destroy records: trash them for good.", ""),
		tool("a", "store", "unlink", "Delete a file.", ""),
		tool("a", "store", "list", "List the records.", ""),
	)
	x := New(tb, nil)
	hits := x.Search(context.Background(), "delete this file", Filter{})
	if got := names(tb, hits); len(got) < 2 || got[0] != "unlink" || got[1] != "records_cleanup" {
		t.Fatalf("delete this file: %v (%v), want unlink then records_cleanup", got, hits)
	}
}

// wordnet.txt is what related reads by binary search: sorted by stem, one
// line each, every stem with a relative.
func TestWordNetThesaurusIsSorted(t *testing.T) {
	e := wordnet()
	if len(e.stems) < 5000 {
		t.Fatalf("%d entries", len(e.stems))
	}
	prev := ""
	for i, k := range e.stems {
		if k <= prev || strings.TrimSpace(e.rest[i]) == "" || strings.Contains(k, " ") {
			t.Fatalf("entry %q %q after %q", k, e.rest[i], prev)
		}
		prev = k
	}
}

// A query word finds a tool by its WordNet relatives, below the tools that
// hold the word itself.
func TestWordNetRelativesFindTheTool(t *testing.T) {
	tb := table(
		tool("geo", "maps", "maps_elevation", "Get the height above sea level of points on the earth.", ""),
		tool("geo", "maps", "maps_directions", "Route between two places by car, bike or on foot.", ""),
		tool("fleet", "fleet", "fleet_list", "List the automobiles of the fleet.", ""),
		tool("geo", "maps", "maps_geocode", "Turn an address into coordinates.", ""),
	)
	x := New(tb, nil)
	for q, want := range map[string][]string{
		"how high is the summit": {"maps_elevation"},
		"automobile":             {"fleet_list", "maps_directions"},
	} {
		if got := names(tb, x.Search(context.Background(), q, Filter{})); !slices.Equal(got[:min(len(got), len(want))], want) {
			t.Errorf("%q: %v, want %v first", q, got, want)
		}
	}
}

// A file's name in a task is a file of its kind: logo.png is an image
// file, notes.txt a file, and the name without its extension stays a word.
func TestFileNamesAreFilesOfTheirKind(t *testing.T) {
	tb := table(
		tool("fs", "fs", "fs_read_text_file", "Read a text file and return its contents.", ""),
		tool("fs", "fs", "fs_read_media_file", "Read an image or audio file and return it base64-encoded.", ""),
		tool("ci", "ci", "ci_lint", "Validate a gitlab-ci configuration.", ""),
		tool("web", "web", "web_png", "Render a web page to PNG.", ""),
	)
	x := New(tb, nil)
	for q, want := range map[string]string{
		"open logo.png":                   "fs_read_media_file",
		"open notes/todo.txt for me":      "fs_read_text_file",
		"is this .gitlab-ci.yml valid?":   "ci_lint",
		"play the intro.MP3 from the box": "fs_read_media_file",
	} {
		if got := names(tb, x.Search(context.Background(), q, Filter{})); len(got) == 0 || got[0] != want {
			t.Errorf("%q: got %v, want %s first", q, got, want)
		}
	}
}

// An issue tracker's key in a task (ENG-204) stands for an issue.
func TestIssueKeysAreIssues(t *testing.T) {
	tb := table(
		tool("tracker", "tracker", "tracker_add_issue_to_project", "Add an issue to a project.", ""),
		tool("tracker", "tracker", "tracker_create_project", "Create a project.", ""),
	)
	x := New(tb, nil)
	if got := names(tb, x.Search(context.Background(), "put ENG-204 into the Onboarding project", Filter{})); len(got) == 0 || got[0] != "tracker_add_issue_to_project" {
		t.Errorf("got %v, want tracker_add_issue_to_project first", got)
	}
	for w, want := range map[string]bool{"ENG-204": true, "PROJ2-7,": true, "eng-204": false, "E-1": false, "ENG-": false, "ENG-2a": false, "-204": false} {
		if got := issueKey(w); got != want {
			t.Errorf("issueKey(%q) = %v, want %v", w, got, want)
		}
	}
}

// A query that asks a question favours the tools that only read; one that
// asks for a change does not.
func TestQuestionsFavourReadOnlyTools(t *testing.T) {
	restart := tool("k8s", "k8s", "k8s_restart_pods", "Pods that are failing: restart them.", "")
	list := tool("k8s", "k8s", "k8s_show_pods", "Pods that are failing: show them.", "")
	list.Annotations = &spec.Annotations{ReadOnlyHint: ptr(true)}
	tb := table(restart, list)
	x := New(tb, nil)
	for q, want := range map[string]string{
		"which pods are failing?":    "k8s_show_pods",
		"are any pods failing":       "k8s_show_pods",
		"the pods are failing, help": "k8s_restart_pods",
	} {
		if got := names(tb, x.Search(context.Background(), q, Filter{})); len(got) != 2 || got[0] != want {
			t.Errorf("%q: got %v, want %s first", q, got, want)
		}
	}
	for q, want := range map[string]bool{"which pods?": true, "Is it up": true, "  what now": true, "show the pods": false, "isolate the pod": false} {
		if got := question(q); got != want {
			t.Errorf("question(%q) = %v, want %v", q, got, want)
		}
	}
}
