package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// searchHeader marks an MCP request that arrived at a search endpoint,
// for the method handlers, as viewHeader carries its view. The handlers
// set it on every request to a search endpoint and remove it from every
// other, whatever a client sent.
const searchHeader = "Toolplane-Gateway-Search"

// The meta-tools of the search endpoints.
const (
	searchToolsName = "search_tools"
	callToolName    = "call_tool"
)

// metaTools are what tools/list answers at a search endpoint: the same two
// for every caller, whatever the table.
var metaTools = []*mcp.Tool{
	{
		Name:  searchToolsName,
		Title: "Search tools",
		Description: "Find the tools that fit a task among every tool of the cluster that you may call. " +
			"Say what you want to do in a few words (\"weather forecast for a city\", \"refund an order\"); " +
			"the best matches come first, each with its name, description and input schema. " +
			"Then call the one you need with call_tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(MaxQueryBytes) + `,"description":"What the tool should do, in a few words."},` +
			`"limit":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(MaxSearchLimit) + `,"default":` + strconv.Itoa(DefaultSearchLimit) + `,"description":"How many tools to return at most."}` +
			`},"required":["query"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"revision":{"type":"string"},` +
			`"tools":{"type":"array","items":{"type":"object"},"description":"The tools found, best first: table entries (name, description, inputSchema, toolSet, …) with a score."},` +
			`"ttlMs":{"type":"integer"},"cacheScope":{"type":"string"}` +
			`},"required":["tools"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptrTo(false)},
	},
	{
		Name:  callToolName,
		Title: "Call a tool",
		Description: "Call a tool that search_tools found, by its name, with arguments as its input schema describes them. " +
			"The tool's own result comes back unchanged.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","minLength":1,"description":"The tool's name, as search_tools gives it."},` +
			`"arguments":{"type":"object","description":"The tool's arguments, as its inputSchema describes them."}` +
			`},"required":["name"],"additionalProperties":false}`),
	},
}

func ptrTo[T any](v T) *T { return &v }

// serveSearchMCP serves the search endpoints, /mcp/search and the search of
// each view, through the same MCP server as /mcp: the request is marked
// with searchHeader, and searchMiddleware answers it.
func (g *Gateway) serveSearchMCP(w http.ResponseWriter, r *http.Request) {
	v := view{namespace: r.PathValue("namespace"), name: r.PathValue("name")}
	r.Header.Set(viewHeader, v.String())
	r.Header.Set(searchHeader, "1")
	g.metrics.inFlight.Inc()
	defer g.metrics.inFlight.Dec()
	// The bounds of serveMCP: the caller's streams, and a new session's
	// count and lifetime.
	release, ok := g.acquireCallerStream(w, r)
	if !ok {
		return
	}
	defer release()
	r.Header.Del(statefulHeader)
	if g.sessions != nil && r.Header.Get("Mcp-Protocol-Version") < modernProtocol {
		r.Header.Set(statefulHeader, "1")
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			g.sessionLimits.serveNew(w, r, g.sessions)
			return
		}
		g.sessions.ServeHTTP(w, r)
		return
	}
	g.stateless.ServeHTTP(w, r)
}

// searchMiddleware answers tools/list and the meta-tools' tools/call at the
// search endpoints, and passes everything else on: a tools/call of a table
// tool by its own name, and call_tool's call, go to the gateway's own
// tools/call as at /mcp, authorization and timeout included.
func (g *Gateway) searchMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		header, _ := extraOf(req)
		if header.Get(searchHeader) == "" {
			return next(ctx, method, req)
		}
		// One budget of authorization questions for the request: a
		// call_tool's own call draws from it too.
		ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			res := &mcp.ListToolsResult{Tools: metaTools}
			// The meta-tools are the same for every caller.
			res.TTLMs = max(0, int(g.opts.ListTTL.Milliseconds()))
			res.CacheScope = "public"
			return res, nil
		case *mcp.CallToolRequest:
			switch r.Params.Name {
			case searchToolsName:
				return g.searchTools(ctx, r)
			case callToolName:
				name, args, err := callToolArguments(r.Params.Arguments)
				if err != nil {
					return errorResult("call_tool: " + err.Error()), nil
				}
				routed := &mcp.CallToolRequest{
					Session: r.Session,
					// A retry's answers go with it (relay.go).
					Params: &mcp.CallToolParamsRaw{Meta: r.Params.Meta, Name: name, Arguments: args,
						InputResponses: r.Params.InputResponses, RequestState: r.Params.RequestState},
					Extra: r.Extra,
				}
				return next(ctx, method, routed)
			}
		}
		return next(ctx, method, req)
	}
}

// searchTools answers search_tools.
func (g *Gateway) searchTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	header, token := extraOf(req)
	q, err := searchToolsArguments(req.Params.Arguments)
	if err == nil {
		err = checkQuery(&q)
	}
	if err != nil {
		return errorResult("search_tools: " + strings.TrimPrefix(err.Error(), errBadQuery.Error()+": ")), nil
	}
	q.v = viewFrom(header)
	s := g.snapshot()
	hits, err := g.search(ctx, callerFrom(token), s, q)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	res := g.searchResult(s, hits)
	structured, err := json.Marshal(res)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the result: " + err.Error()}
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: listing(q.text, res)}},
		StructuredContent: json.RawMessage(structured),
	}, nil
}

// searchToolsArguments reads search_tools' arguments as leniently as
// toolkit's binder would: a limit may come as a string.
func searchToolsArguments(raw json.RawMessage) (searchQuery, error) {
	var a struct {
		Query json.RawMessage `json:"query"`
		Limit json.RawMessage `json:"limit"`
	}
	var q searchQuery
	if err := decodeObject(raw, &a); err != nil {
		return q, badQuery("the arguments must be an object with query (a string) and limit (an integer)")
	}
	if len(a.Query) == 0 || string(a.Query) == "null" {
		return q, badQuery("query is required: say in a few words what the tool should do")
	}
	if err := json.Unmarshal(a.Query, &q.text); err != nil {
		return q, badQuery("query must be a string")
	}
	if len(a.Limit) > 0 && string(a.Limit) != "null" {
		l := strings.Trim(string(a.Limit), `"`)
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return q, badQuery("limit must be an integer from 1 to %d", MaxSearchLimit)
		}
		q.limit = n
	}
	return q, nil
}

// callToolArguments reads call_tool's arguments: the name of the tool and
// its arguments, which go on as sent (the workload's binder repairs them).
func callToolArguments(raw json.RawMessage) (string, json.RawMessage, error) {
	var a struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeObject(raw, &a); err != nil {
		return "", nil, fmt.Errorf("the arguments must be an object with name (a string) and arguments (an object)")
	}
	var name string
	if len(a.Name) == 0 || json.Unmarshal(a.Name, &name) != nil || name == "" {
		return "", nil, fmt.Errorf("name is required: the name of a tool that search_tools found")
	}
	args := a.Arguments
	if string(bytes.TrimSpace(args)) == "null" {
		args = nil
	}
	return name, args, nil
}

// decodeObject decodes a JSON object, or one a model wrapped in a JSON
// string, into v. Missing arguments are an empty object.
func decodeObject(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		raw = json.RawMessage(s)
	}
	return json.Unmarshal(raw, v)
}

// listing is the text content of search_tools: one line per tool a model
// can read and call from, with its arguments' names and types.
func listing(query string, res *searchResult) string {
	var b strings.Builder
	if len(res.Tools) == 0 {
		fmt.Fprintf(&b, "No tool found for %q. Try other words, or fewer.", clip(query, 200))
		return b.String()
	}
	fmt.Fprintf(&b, "%d tools for %q, best first. Call one with call_tool {\"name\": …, \"arguments\": {…}}.\n", len(res.Tools), clip(query, 200))
	for k, t := range res.Tools {
		fmt.Fprintf(&b, "%d. %s(%s)", k+1, t.Name, signature(t.InputSchema))
		if d := firstLine(t.Description); d != "" {
			fmt.Fprintf(&b, ": %s", clip(d, 240))
		}
		fmt.Fprintf(&b, " [%s]\n", t.ToolSet)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// signature is an input schema's top-level properties as a short
// parameter list: "city: string, days?: integer".
func signature(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any   `json:"type"`
			Enum []any `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	// Required first, each group by name, so the listing is stable.
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	const maxParams = 8
	parts := make([]string, 0, min(len(names), maxParams+1))
	for k, n := range names {
		if k == maxParams {
			parts = append(parts, fmt.Sprintf("… %d more", len(names)-maxParams))
			break
		}
		p := s.Properties[n]
		typ := "any"
		switch t := p.Type.(type) {
		case string:
			typ = t
		case []any:
			var ts []string
			for _, x := range t {
				if xs, ok := x.(string); ok {
					ts = append(ts, xs)
				}
			}
			typ = strings.Join(ts, "|")
		}
		if len(p.Enum) > 0 && len(p.Enum) <= 6 {
			var es []string
			for _, e := range p.Enum {
				b, _ := json.Marshal(e)
				es = append(es, string(b))
			}
			typ = strings.Join(es, "|")
		}
		opt := "?"
		if required[n] {
			opt = ""
		}
		parts = append(parts, clip(n, 64)+opt+": "+clip(typ, 80))
	}
	return strings.Join(parts, ", ")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}
