package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The tools of the search tests: a few that a task's words should find.

type cityIn struct {
	City string `json:"city" description:"The city, in any language"`
	Days int    `json:"days,omitempty" default:"1" tool:"minimum=1;maximum=7" description:"How many days ahead"`
}

func forecastTool() *toolkit.Tool {
	return toolkit.MustNew("weather_forecast", "The weather forecast of a city: temperature, rain and wind for the coming days", func(_ context.Context, in cityIn) (string, error) {
		return fmt.Sprintf("%s: sunny for %d days", in.City, in.Days), nil
	})
}

type customerIn struct {
	ID string `json:"id" description:"The customer's id, such as c-42"`
}

func customerTool() *toolkit.Tool {
	return toolkit.MustNew("query_customer", "Looks up a customer of the CRM by id: name, email and open orders", func(_ context.Context, in customerIn) (string, error) {
		return "customer " + in.ID, nil
	})
}

type refundIn struct {
	Order  string `json:"order" description:"The order to refund"`
	Amount string `json:"amount,omitempty" description:"How much; the whole order if empty"`
}

func refundTool() *toolkit.Tool {
	return toolkit.MustNew("refund_order", "Refunds a customer's order, in whole or in part, to the card it was paid with", func(_ context.Context, in refundIn) (string, error) {
		return "refunded " + in.Order, nil
	})
}

// searchFixture is a gateway with a weather workload and a crm workload.
type searchFixture struct {
	g            *gateway.Gateway
	url          string
	tbl          *spec.Table
	crm, weather *workload
}

func newSearchFixture(t *testing.T, opts gateway.Options) *searchFixture {
	t.Helper()
	crm := newWorkload(t, "crm", "crm-tools", "crm_", customerTool(), refundTool(), echoTool("crm"))
	weather := newWorkload(t, "weather", "weather-tools", "", forecastTool())
	tbl := table(crm.tableTools(), weather.tableTools())
	g, u := newGateway(t, new(routes).add(crm, weather), opts)
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	return &searchFixture{g: g, url: u, tbl: tbl, crm: crm, weather: weather}
}

// searchResult is GET /v1/search's body.
type searchResult struct {
	Revision   string            `json:"revision"`
	Tools      []json.RawMessage `json:"tools"`
	TTLMs      *int              `json:"ttlMs"`
	CacheScope string            `json:"cacheScope"`
}

func (r *searchResult) names(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, raw := range r.Tools {
		var e struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Name)
	}
	return out
}

func getSearch(t testing.TB, base, query, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, base+"/v1/search?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func search(t testing.TB, base, query, token string) *searchResult {
	t.Helper()
	code, b, _ := getSearch(t, base, query, token)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/search?%s: %d %s", query, code, b)
	}
	var r searchResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return &r
}

func TestSearchEndpoint(t *testing.T) {
	f := newSearchFixture(t, gateway.Options{})

	r := search(t, f.url, "q="+url.QueryEscape("weather forecast in a city"), "")
	if r.Revision != f.tbl.Revision {
		t.Errorf("revision %s, want the table's %s", r.Revision, f.tbl.Revision)
	}
	if got := r.names(t); len(got) == 0 || got[0] != "weather_forecast" {
		t.Fatalf("the weather query found %v", got)
	}
	if r.TTLMs == nil || *r.TTLMs <= 0 || r.CacheScope != "public" {
		t.Errorf("ttlMs %v cacheScope %q", r.TTLMs, r.CacheScope)
	}

	// An entry is the table's entry, field for field, plus a score.
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(r.Tools[0], &entry); err != nil {
		t.Fatal(err)
	}
	var score float64
	if err := json.Unmarshal(entry["score"], &score); err != nil || score <= 0 {
		t.Errorf("score %s", entry["score"])
	}
	delete(entry, "score")
	i := slices.IndexFunc(f.tbl.Tools, func(tt spec.TableTool) bool { return tt.Name == "weather_forecast" })
	want, _ := json.Marshal(f.tbl.Tools[i])
	got, _ := json.Marshal(entry)
	var wantMap, gotMap any
	_ = json.Unmarshal(want, &wantMap)
	_ = json.Unmarshal(got, &gotMap)
	if fmt.Sprint(wantMap) != fmt.Sprint(gotMap) {
		t.Errorf("entry\n%s\nwant the table's\n%s", got, want)
	}

	// Scores are best first.
	all := search(t, f.url, "q=customer+order", "")
	var prev = 1e300
	for _, raw := range all.Tools {
		var e struct{ Score float64 }
		_ = json.Unmarshal(raw, &e)
		if e.Score > prev {
			t.Errorf("scores not best first: %v", all.names(t))
		}
		prev = e.Score
	}
	if n := all.names(t); !slices.Contains(n, "crm_refund_order") || !slices.Contains(n, "crm_query_customer") {
		t.Errorf("customer order found %v", n)
	}

	// Filters: namespace and ToolSet.
	if n := search(t, f.url, "q=customer+weather&namespace=weather", "").names(t); !slices.Equal(n, []string{"weather_forecast"}) {
		t.Errorf("namespace=weather found %v", n)
	}
	if n := search(t, f.url, "q=customer+weather&toolSet=crm/crm-tools", "").names(t); slices.Contains(n, "weather_forecast") || len(n) == 0 {
		t.Errorf("toolSet=crm/crm-tools found %v", n)
	}
	if n := search(t, f.url, "q=customer&limit=1", "").names(t); len(n) != 1 {
		t.Errorf("limit=1 found %v", n)
	}

	// Bad requests are 400 with a JSON error body.
	for _, q := range []string{"", "q=", "q=+++", "q=x&limit=0", "q=x&limit=ten", "q=x&limit=-1", "q=x&toolSet=crm", "q=x&toolSet=/a", "q=x&toolSet=a/b/c",
		"q=" + strings.Repeat("a", gateway.MaxQueryBytes+1), "q=x&readOnly=maybe"} {
		code, b, h := getSearch(t, f.url, q, "")
		var er spec.ErrorResponse
		if code != http.StatusBadRequest || json.Unmarshal(b, &er) != nil || er.Error.Code == "" || er.Error.Message == "" || h.Get("Content-Type") != "application/json" {
			t.Errorf("?%.40s: %d %s", q, code, b)
		}
	}
	// A limit over the bound is lowered to it, not refused.
	if code, b, _ := getSearch(t, f.url, "q=x&limit=500", ""); code != http.StatusOK {
		t.Errorf("limit=500: %d %s", code, b)
	}
}

func TestSearchLimitsDefaultAndMaximum(t *testing.T) {
	tools := make([]spec.TableTool, 80)
	for i := range tools {
		n := fmt.Sprintf("lookup_record_%02d", i)
		tools[i] = spec.TableTool{
			Name: n, SourceName: n, Description: "Looks up one record",
			InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:     spec.ObjectReference{Namespace: "bulk", Name: "bulk"},
			Endpoints:   &spec.Endpoints{Invoke: "http://bulk.bulk.svc:8080/tools/" + n},
		}
	}
	g, u := newGateway(t, nil, gateway.Options{})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	if n := len(search(t, u, "q=lookup+record", "").Tools); n != gateway.DefaultSearchLimit {
		t.Errorf("without a limit %d tools, want %d", n, gateway.DefaultSearchLimit)
	}
	if n := len(search(t, u, "q=lookup+record&limit=1000", "").Tools); n != gateway.MaxSearchLimit {
		t.Errorf("limit=1000 gave %d tools, want %d", n, gateway.MaxSearchLimit)
	}
}

// TestSearchIsFresh: a tool published after the gateway started is found
// in the next revision, and a removed one never again.
func TestSearchIsFresh(t *testing.T) {
	crm := newWorkload(t, "crm", "crm-tools", "crm_", customerTool())
	weather := newWorkload(t, "weather", "weather-tools", "", forecastTool())
	g, u := newGateway(t, new(routes).add(crm, weather), gateway.Options{})
	if err := g.SetTable(table(crm.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, u+"/mcp/search", "2026-07-28", nil, nil)
	if n := search(t, u, "q=weather+forecast", "").names(t); slices.Contains(n, "weather_forecast") {
		t.Fatalf("found %v before it was published", n)
	}
	if err := g.SetTable(table(crm.tableTools(), weather.tableTools())); err != nil {
		t.Fatal(err)
	}
	if n := search(t, u, "q=weather+forecast", "").names(t); !slices.Contains(n, "weather_forecast") {
		t.Errorf("the new tool is not found: %v", n)
	}
	if n := searchTools(t, cs, "weather forecast", 0).names(t); !slices.Contains(n, "weather_forecast") {
		t.Errorf("search_tools does not find the new tool: %v", n)
	}
	if err := g.SetTable(table(crm.tableTools())); err != nil {
		t.Fatal(err)
	}
	if n := search(t, u, "q=weather+forecast", "").names(t); slices.Contains(n, "weather_forecast") {
		t.Errorf("the removed tool is still found: %v", n)
	}
	if n := searchTools(t, cs, "weather forecast", 0).names(t); slices.Contains(n, "weather_forecast") {
		t.Errorf("search_tools still finds the removed tool: %v", n)
	}
}

// searchTools calls search_tools and checks that its text and structured
// content agree.
func searchTools(t testing.TB, cs *mcp.ClientSession, query string, limit int) *searchResult {
	t.Helper()
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "search_tools", Arguments: args})
	if err != nil {
		t.Fatalf("search_tools: %v", err)
	}
	if res.IsError {
		t.Fatalf("search_tools: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var r searchResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	for _, n := range r.names(t) {
		if !strings.Contains(text(res), n+"(") {
			t.Errorf("the text listing does not name %s:\n%s", n, text(res))
		}
	}
	return &r
}

func TestSearchMCPEndpoint(t *testing.T) {
	f := newSearchFixture(t, gateway.Options{})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connect(t, f.url+"/mcp/search", era, nil, nil)
			got, _ := listAll(t, cs)
			if !slices.Equal(got, []string{"search_tools", "call_tool"}) {
				t.Fatalf("tools/list at /mcp/search gives %v", got)
			}

			r := searchTools(t, cs, "weather forecast for a city", 3)
			if n := r.names(t); len(n) == 0 || n[0] != "weather_forecast" || len(n) > 3 {
				t.Fatalf("search_tools found %v", n)
			}
			// The structured tools are /v1/search's, entry for entry.
			v1 := search(t, f.url, "q="+url.QueryEscape("weather forecast for a city")+"&limit=3", "")
			if !slices.Equal(r.names(t), v1.names(t)) || r.Revision != v1.Revision {
				t.Errorf("search_tools %v, /v1/search %v", r.names(t), v1.names(t))
			}
			var e spec.TableTool
			if err := json.Unmarshal(r.Tools[0], &e); err != nil || len(e.InputSchema) == 0 || e.ToolSet.Name != "weather-tools" {
				t.Errorf("entry %s", r.Tools[0])
			}

			// call_tool is tools/call of the name, result unchanged.
			via, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
				"name": "weather_forecast", "arguments": map[string]any{"city": "Oslo", "days": "3"}}})
			if err != nil || via.IsError || text(via) != "Oslo: sunny for 3 days" {
				t.Fatalf("call_tool: %v %+v", err, via)
			}
			direct := connect(t, f.url+"/mcp", era, nil, nil)
			want, err := direct.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_echo", Arguments: map[string]any{"text": "ab", "count": 2}})
			if err != nil {
				t.Fatal(err)
			}
			got2, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
				"name": "crm_echo", "arguments": map[string]any{"text": "ab", "count": 2}}})
			if err != nil {
				t.Fatal(err)
			}
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got2)
			if string(wb) != string(gb) {
				t.Errorf("call_tool gives\n%s\n/mcp gives\n%s", gb, wb)
			}

			// A table tool called by its own name works too.
			own, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "crm_query_customer", Arguments: map[string]any{"id": "c-42"}})
			if err != nil || own.IsError || text(own) != "customer c-42" {
				t.Errorf("by its own name: %v %+v", err, own)
			}

			// Unknown tools fail as at /mcp; bad meta-tool arguments are
			// an error result the model can read.
			if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "nope"}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("call_tool of an unknown tool: %v", err)
			}
			for _, bad := range []map[string]any{{}, {"name": 7}, {"arguments": map[string]any{}}} {
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: bad})
				if err != nil || !res.IsError {
					t.Errorf("call_tool %v: %v %+v", bad, err, res)
				}
			}
			for _, bad := range []map[string]any{{}, {"query": ""}, {"query": 3}, {"query": "x", "limit": "many"}} {
				res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "search_tools", Arguments: bad})
				if err != nil || !res.IsError {
					t.Errorf("search_tools %v: %v %+v", bad, err, res)
				}
			}
		})
	}
}

// TestSearchViews: the search of a view finds and calls only the view's
// tools.
func TestSearchViews(t *testing.T) {
	f := newSearchFixture(t, gateway.Options{})
	cs := connect(t, f.url+"/mcp/namespaces/crm/search", "2026-07-28", nil, nil)
	if n := searchTools(t, cs, "weather forecast customer", 0).names(t); slices.Contains(n, "weather_forecast") || len(n) == 0 {
		t.Errorf("the crm view's search found %v", n)
	}
	if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "weather_forecast", "arguments": map[string]any{"city": "x"}}}); err == nil {
		t.Error("the crm view's call_tool called a weather tool")
	}
	ts := connect(t, f.url+"/mcp/toolsets/weather/weather-tools/search", "2025-11-25", nil, nil)
	if n := searchTools(t, ts, "weather forecast customer", 0).names(t); !slices.Equal(n, []string{"weather_forecast"}) {
		t.Errorf("the weather ToolSet's search found %v", n)
	}
	// A client's own search header does not make /mcp a search endpoint.
	hc := &http.Client{Transport: headerTransport{"Toolplane-Gateway-Search": "1"}}
	plain := connect(t, f.url+"/mcp", "2026-07-28", nil, hc)
	if got, _ := listAll(t, plain); slices.Contains(got, "search_tools") {
		t.Errorf("/mcp with a forged search header lists %v", got)
	}
}

// grants is an Auth for tests: each token is a caller of that name, and
// may call the tools its grants name: "ns/name" one tool, "ns/" every tool
// of a namespace, "/" every tool. A caller in failing gets errors.
type grants struct {
	of      map[string][]string
	failing string
}

func (g grants) Authenticate(_ context.Context, token string) (*gateway.Caller, error) {
	if _, ok := g.of[token]; !ok {
		return nil, gateway.ErrUnauthenticated
	}
	return &gateway.Caller{User: token}, nil
}

func (g grants) Allowed(_ context.Context, c *gateway.Caller, namespace, name string) (bool, error) {
	if c.User == g.failing {
		return false, fmt.Errorf("the authorizer is down")
	}
	return slices.Contains(g.of[c.User], namespace+"/"+name), nil
}

func TestSearchNeverShowsAToolTheCallerMayNotCall(t *testing.T) {
	auth := grants{of: map[string][]string{
		"one":    {"crm/crm_query_customer"},
		"crm":    {"crm/"},
		"all":    {"/"},
		"none":   {},
		"broken": {},
	}, failing: "broken"}
	f := newSearchFixture(t, gateway.Options{Auth: auth})
	const q = "weather forecast customer refund order echo"

	for tok, want := range map[string][]string{
		"one":  {"crm_query_customer"},
		"none": nil,
	} {
		if got := search(t, f.url, "q="+url.QueryEscape(q)+"&limit=50", tok).names(t); !slices.Equal(got, want) {
			t.Errorf("%s: /v1/search found %v, may call only %v", tok, got, want)
		}
	}
	crm := search(t, f.url, "q="+url.QueryEscape(q), "crm")
	for _, n := range crm.names(t) {
		if !strings.HasPrefix(n, "crm_") {
			t.Errorf("crm found %s", n)
		}
	}
	if len(crm.names(t)) != 3 || crm.CacheScope != "private" {
		t.Errorf("crm found %v, cacheScope %q", crm.names(t), crm.CacheScope)
	}
	if n := search(t, f.url, "q="+url.QueryEscape(q)+"&limit=50", "all").names(t); len(n) != 4 {
		t.Errorf("all found %v", n)
	}
	// The filter applies before the limit: the best match overall is a
	// weather tool, and the one tool "one" may call still fills the limit.
	if n := search(t, f.url, "q="+url.QueryEscape("weather forecast customer")+"&limit=1", "one").names(t); !slices.Equal(n, []string{"crm_query_customer"}) {
		t.Errorf("limit=1 for one found %v", n)
	}
	if code, _, _ := getSearch(t, f.url, "q=weather", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, b, h := getSearch(t, f.url, "q=weather", "one"); code != http.StatusOK || !strings.Contains(h.Get("Cache-Control"), "private") {
		t.Errorf("one: %d %s %v", code, b, h)
	}
	// An authorizer that fails answers nothing rather than too much.
	if code, b, _ := getSearch(t, f.url, "q=weather", "broken"); code != http.StatusServiceUnavailable || strings.Contains(string(b), "weather_forecast") {
		t.Errorf("broken authorizer: %d %s", code, b)
	}

	for _, era := range eras {
		cs := connect(t, f.url+"/mcp/search", era, nil, bearerClient("one"))
		if n := searchTools(t, cs, q, 50).names(t); !slices.Equal(n, []string{"crm_query_customer"}) {
			t.Errorf("%s: search_tools found %v", era, n)
		}
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "crm_query_customer", "arguments": map[string]any{"id": "c-1"}}})
		if err != nil || res.IsError {
			t.Errorf("%s: call_tool of a granted tool: %v %+v", era, err, res)
		}
		for _, denied := range []string{"crm_refund_order", "weather_forecast"} {
			if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": denied, "arguments": map[string]any{}}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("%s: call_tool of ungranted %s: %v", era, denied, err)
			}
			if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: denied, Arguments: map[string]any{}}); err == nil {
				t.Errorf("%s: tools/call of ungranted %s at /mcp/search worked", era, denied)
			}
		}
	}
	cs := connect(t, f.url+"/mcp/search", "2026-07-28", nil, bearerClient("broken"))
	if _, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "weather"}}); err == nil {
		t.Error("search_tools with a failing authorizer answered")
	}
}

func bearerClient(token string) *http.Client {
	return &http.Client{Transport: headerTransport{"Authorization": "Bearer " + token}}
}

// TestDiscoverySearchesThroughTheGateway: toolkit/discovery's remote
// search reads /v1/search as the gateway writes it, with the caller's
// token and grants.
func TestDiscoverySearchesThroughTheGateway(t *testing.T) {
	f := newSearchFixture(t, gateway.Options{Auth: grants{of: map[string][]string{"crm": {"crm/"}}}})
	c := &discovery.Client{TableHTTPClient: bearerClient("crm")}
	res, err := c.SearchURL(bounded(t), f.url+"/v1/search", "refund a customer's order", &discovery.SearchOptions{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || res[0].Name != "crm_refund_order" || res[0].Score <= 0 || len(res[0].InputSchema) == 0 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.ToolSet.Namespace != "crm" {
			t.Errorf("crm found %s of %s", r.Name, r.ToolSet)
		}
	}
	if _, err := (&discovery.Client{}).SearchURL(bounded(t), f.url+"/v1/search", "refund", nil); err == nil {
		t.Error("a search without a token was answered")
	}
}

// countingAuth grants nothing and counts the questions it is asked.
type countingAuth struct{ asked atomic.Int64 }

func (a *countingAuth) Authenticate(context.Context, string) (*gateway.Caller, error) {
	return &gateway.Caller{User: "nobody"}, nil
}

func (a *countingAuth) Allowed(context.Context, *gateway.Caller, string, string) (bool, error) {
	a.asked.Add(1)
	return false, nil
}

// TestOneSearchAsksABoundedNumberOfQuestions: a caller granted nothing
// whose query matches every one of 5,000 tools cannot make one search
// authorize the whole table.
func TestOneSearchAsksABoundedNumberOfQuestions(t *testing.T) {
	tools := make([]spec.TableTool, 5000)
	for i := range tools {
		n := fmt.Sprintf("lookup_record_%04d", i)
		tools[i] = spec.TableTool{
			Name: n, SourceName: n, Description: "Looks up one record",
			InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:     spec.ObjectReference{Namespace: fmt.Sprintf("team-%d", i%7), Name: "bulk"},
			Endpoints:   &spec.Endpoints{Invoke: fmt.Sprintf("http://bulk.team-%d.svc:8080/tools/%s", i%7, n)},
		}
	}
	auth := &countingAuth{}
	g, u := newGateway(t, nil, gateway.Options{Auth: auth})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	if n := search(t, u, "q=lookup+record&limit=50", "x").names(t); len(n) != 0 {
		t.Fatalf("found %v", n)
	}
	// An authorizer that keeps no answers has every question counted
	// against the request's budget.
	if asked := auth.asked.Load(); asked > gateway.DefaultMaxReviewsPerRequest || asked == 0 {
		t.Errorf("one search asked %d authorization questions", asked)
	}

	// A request's budget of reviews ends the search with what it decided,
	// not with an error.
	tight := &countingAuth{}
	g2, u2 := newGateway(t, nil, gateway.Options{Auth: tight, MaxReviewsPerRequest: 30})
	if err := g2.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	if n := search(t, u2, "q=lookup+record", "x").names(t); len(n) != 0 {
		t.Fatalf("found %v", n)
	}
	if asked := tight.asked.Load(); asked > 30 || asked == 0 {
		t.Errorf("a budget of 30 reviews let one search ask %d", asked)
	}
	if code, body, _ := getPage(t, u2+"/catalog", "x"); code != http.StatusOK || strings.Contains(body, "lookup_record_") {
		t.Errorf("the catalog under a spent budget: %d", code)
	}
}

// TestSearchWithSessions: with Options.Sessions a 2025-era client of
// /mcp/search gets a session, and the session is still the search
// endpoint's on every request.
func TestSearchWithSessions(t *testing.T) {
	f := newSearchFixture(t, gateway.Options{Sessions: true})
	cs := connect(t, f.url+"/mcp/search", "2025-11-25", nil, nil)
	if cs.ID() == "" {
		t.Fatal("no session")
	}
	if got, _ := listAll(t, cs); !slices.Equal(got, []string{"search_tools", "call_tool"}) {
		t.Fatalf("tools/list in a session at /mcp/search gives %v", got)
	}
	if n := searchTools(t, cs, "weather forecast", 0).names(t); len(n) == 0 || n[0] != "weather_forecast" {
		t.Errorf("search_tools in a session found %v", n)
	}
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "weather_forecast", "arguments": map[string]any{"city": "Oslo"}}})
	if err != nil || res.IsError || text(res) != "Oslo: sunny for 1 days" {
		t.Errorf("call_tool in a session: %v %+v", err, res)
	}
}
