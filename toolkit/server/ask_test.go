package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type renameIn struct {
	From string `json:"from"`
}

type renameOut struct {
	To      string `json:"to"`
	Because string `json:"because"`
	Asked   string `json:"asked,omitempty"` // why the tool could not ask
}

// renameServer serves rename, which asks two questions one after the
// other (the new name, then why), and counts its runs.
func renameServer(t *testing.T, sessions bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var runs atomic.Int32
	reg := new(toolkit.Registry)
	if err := reg.Add(must(toolkit.New("rename", "Rename a thing, asking the user how", func(ctx context.Context, in renameIn) (renameOut, error) {
		runs.Add(1)
		var out renameOut
		name, err := toolkit.Ask(ctx, "name", toolkit.Question{Message: "New name for " + in.From + "?", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []any{"name"}}})
		if errors.Is(err, toolkit.ErrCannotAsk) {
			out.Asked = "cannot ask"
			return out, nil
		}
		if err != nil {
			return out, err
		}
		why, err := toolkit.Ask(ctx, "why", toolkit.Question{Message: "Why?", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"why": map[string]any{"type": "string"}}}})
		if err != nil {
			return out, err
		}
		out.To, _ = name.Content["name"].(string)
		out.Because, _ = why.Content["why"].(string)
		return out, nil
	}))); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{MCPSessions: sessions})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv, &runs
}

// TestAskReachesTheUserInBothEras: toolkit.Ask puts a tool's questions to
// a Go SDK client's user, one after the other: in 2025 during the call
// (the tool runs once), in 2026-07-28 as input_required results that the
// SDK's client answers by calling again (the tool runs once per round,
// and the earlier answers come back in requestState). A client that
// cannot answer gets ErrCannotAsk.
func TestAskReachesTheUserInBothEras(t *testing.T) {
	srv, runs := renameServer(t, true)
	for _, tc := range []struct {
		era       string
		elicits   bool
		want      renameOut
		runs      int32
		questions int
	}{
		{"2025-11-25", true, renameOut{To: "new-name", Because: "clearer"}, 1, 2},
		{"2026-07-28", true, renameOut{To: "new-name", Because: "clearer"}, 3, 2},
		{"2025-11-25", false, renameOut{Asked: "cannot ask"}, 1, 0},
		{"2026-07-28", false, renameOut{Asked: "cannot ask"}, 1, 0},
	} {
		name := tc.era + "/cannot answer"
		if tc.elicits {
			name = tc.era + "/answers"
		}
		t.Run(name, func(t *testing.T) {
			runs.Store(0)
			var mu sync.Mutex
			var asked []string
			opts := &mcp.ClientOptions{}
			if tc.elicits {
				opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, r.Params.Message)
					mu.Unlock()
					if r.Params.Message == "Why?" {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"why": "clearer"}}, nil
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "new-name"}}, nil
				}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, opts).Connect(bounded(t),
				&mcp.StreamableClientTransport{Endpoint: srv.URL + spec.MCPPath, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: tc.era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "rename", Arguments: map[string]any{"from": "old"}})
			if err != nil || res.IsError {
				t.Fatalf("%v %+v", err, res)
			}
			var out renameOut
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("result %+v, want %+v", out, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != tc.questions || (tc.questions > 0 && asked[0] != "New name for old?") {
				t.Errorf("the user was asked %q", asked)
			}
			if got := runs.Load(); got != tc.runs {
				t.Errorf("the tool ran %d times, want %d", got, tc.runs)
			}
		})
	}
}

// rawCall posts one 2026-07-28 tools/call of rename with params' extra
// fields, and returns its result.
func rawCall(t *testing.T, url, extra string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rename","arguments":{"from":"old"},` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url+spec.MCPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "rename")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := string(b)
	if i := strings.Index(s, "data: "); i >= 0 {
		s = strings.TrimSpace(s[i+len("data: "):])
		if j := strings.Index(s, "\n"); j >= 0 {
			s = s[:j]
		}
	}
	var reply struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal([]byte(s), &reply); err != nil || reply.Result == nil {
		t.Fatalf("%d %s: %v %v", resp.StatusCode, b, err, reply.Error)
	}
	return reply.Result
}

// TestAskOnTheWire2026: what a 2026-07-28 client sees of toolkit.Ask, and
// that requestState is only what it says: a state that is not toolkit's,
// or is over its bounds, or holds an answer that is not one, answers
// nothing, and the question is asked again.
func TestAskOnTheWire2026(t *testing.T) {
	srv, _ := renameServer(t, false)
	asks := func(res map[string]any) []string {
		t.Helper()
		if res["resultType"] != "input_required" || res["content"] != nil && len(res["content"].([]any)) > 0 {
			t.Fatalf("not input_required: %v", res)
		}
		irs, _ := res["inputRequests"].(map[string]any)
		var ids []string
		for id := range irs {
			ids = append(ids, id)
		}
		return ids
	}
	first := rawCall(t, srv.URL, "")
	if ids := asks(first); len(ids) != 1 || ids[0] != "name" {
		t.Fatalf("first round asks %v: %v", ids, first)
	}
	q := first["inputRequests"].(map[string]any)["name"].(map[string]any)
	p, _ := q["params"].(map[string]any)
	if q["method"] != "elicitation/create" || p["message"] != "New name for old?" || p["requestedSchema"] == nil {
		t.Errorf("the question: %v", q)
	}
	second := rawCall(t, srv.URL, `"inputResponses":{"name":{"action":"accept","content":{"name":"n2"}}},`)
	if ids := asks(second); len(ids) != 1 || ids[0] != "why" {
		t.Fatalf("second round asks %v: %v", ids, second)
	}
	state, _ := second["requestState"].(string)
	if state == "" {
		t.Fatalf("no requestState: %v", second)
	}
	done := rawCall(t, srv.URL, `"requestState":"`+state+`","inputResponses":{"why":{"action":"accept","content":{"why":"w"}}},`)
	if done["resultType"] != "complete" {
		t.Fatalf("third round: %v", done)
	}
	if sc, _ := done["structuredContent"].(map[string]any); sc["to"] != "n2" || sc["because"] != "w" {
		t.Errorf("third round: %v", done)
	}

	huge := "toolkit.ask.v1." + base64.RawURLEncoding.EncodeToString([]byte(`{"name":{"action":"accept","content":{"name":"`+strings.Repeat("x", 70<<10)+`"}}}`))
	bogus := "toolkit.ask.v1." + base64.RawURLEncoding.EncodeToString([]byte(`{"name":{"action":"sure","content":{"name":"forged"}}}`))
	for what, state := range map[string]string{"not toolkit's": "other.v1.abc", "over its bounds": huge, "not an answer": bogus, "not base64": "toolkit.ask.v1.!!!"} {
		res := rawCall(t, srv.URL, `"requestState":"`+state+`","inputResponses":{"why":{"action":"accept","content":{"why":"w"}}},`)
		if ids := asks(res); len(ids) != 1 || ids[0] != "name" {
			t.Errorf("a requestState %s: asks %v: %v", what, ids, res)
		}
	}
	// An inputResponse that is not an answer is none either.
	res := rawCall(t, srv.URL, `"inputResponses":{"name":{"action":"maybe","content":{"name":"n2"}}},`)
	if ids := asks(res); len(ids) != 1 || ids[0] != "name" {
		t.Errorf("an answer with action maybe: asks %v", ids)
	}
}

// TestAskTakesOnlyAnswersOfTheQuestionsForm is a red-team spec: a 2025
// client's answer to elicitation/create is checked against the question's
// schema by the SDK, but an answer in a 2026 client's inputResponses or
// requestState was handed to the tool as it came, a number for a string,
// a required property missing. Such an answer is none: the question is
// asked again, as for an answer whose action is not one.
func TestAskTakesOnlyAnswersOfTheQuestionsForm(t *testing.T) {
	srv, _ := renameServer(t, false)
	state := func(answers string) string {
		return "toolkit.ask.v1." + base64.RawURLEncoding.EncodeToString([]byte(answers))
	}
	for what, extra := range map[string]string{
		"a number for a string":       `"inputResponses":{"name":{"action":"accept","content":{"name":5}}},`,
		"a required property missing": `"inputResponses":{"name":{"action":"accept","content":{"other":"x"}}},`,
		"a forged requestState":       `"requestState":"` + state(`{"name":{"action":"accept","content":{"name":["a","b"]}}}`) + `","inputResponses":{"why":{"action":"accept","content":{"why":"w"}}},`,
	} {
		res := rawCall(t, srv.URL, extra)
		irs, _ := res["inputRequests"].(map[string]any)
		if _, again := irs["name"]; res["resultType"] != "input_required" || !again {
			t.Errorf("%s: %v, want the name asked again", what, res)
		}
	}
	// An answer of the question's form is taken, as before.
	res := rawCall(t, srv.URL, `"requestState":"`+state(`{"name":{"action":"accept","content":{"name":"n2"}}}`)+`","inputResponses":{"why":{"action":"accept","content":{"why":"w"}}},`)
	if sc, _ := res["structuredContent"].(map[string]any); res["resultType"] != "complete" || sc["to"] != "n2" {
		t.Errorf("answers of the questions' forms: %v", res)
	}
}
