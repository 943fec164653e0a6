package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Attacks on the gateway by a hostile caller, tenant or workload that once
// worked; each test here failed before its fix.

// metaCanElicit2026 is the _meta of a stateless 2026-07-28 tools/call from
// a client that can answer elicitation.
const metaCanElicit2026 = `"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`

// callResult posts a 2026-07-28 tools/call of name with the params extra
// and returns its result.
func callResult(t *testing.T, url, name, extra string) map[string]any {
	t.Helper()
	reply := replyOf(t, postCall(t, url, name, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`",`+extra+metaCanElicit2026+`}}`))
	res, _ := reply["result"].(map[string]any)
	if res == nil {
		t.Fatalf("no result: %v", reply)
	}
	return res
}

// TestAForeignRetryDoesNotKeepAParkedCallAlive: a retry that names a
// parked call and is not its own (another tool's, or another caller's)
// leaves it as it was. It used to take the call out and park it again,
// with a fresh timeout: whoever knew a requestState could keep the
// backend's call, its connection and goroutine alive past the park
// timeout for as long as they liked, and the call was absent for its own
// client's retry meanwhile.
func TestAForeignRetryDoesNotKeepAParkedCallAlive(t *testing.T) {
	const wait = 1500 * time.Millisecond
	defer gateway.SetParkTimeout(wait)()
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	r.set("ask26.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2026(new(atomic.Int32)), true))
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"), mcpTableTools("apps", "ask26", "/mcp", "ask_2026"))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := callResult(t, url+"/mcp", "ask_2025", "")
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("first answer %v", res)
	}
	answer := `"requestState":"` + state + `","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`
	// Retries that are not the call's own, until well past its timeout.
	for time.Since(start) < 2*wait {
		res := callResult(t, url+"/mcp", "ask_2026", answer)
		if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "no call of this tool waits") {
			t.Fatalf("a foreign retry: %v", res)
		}
	}
	res = callResult(t, url+"/mcp", "ask_2025", answer)
	if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "waited longer than") {
		t.Errorf("the parked call outlived its timeout of %s under foreign retries: %v", wait, res)
	}
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip, another client's address to the gateway.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// callFrom is callResult from hc.
func callFrom(t *testing.T, hc *http.Client, url, name, extra string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `",` + extra + metaCanElicit2026 + `}}`
	req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data: ")); i >= 0 {
		b = bytes.TrimSpace(b[i+len("data: "):])
	}
	var reply struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || reply.Result == nil {
		t.Fatalf("no result: %s", b)
	}
	return reply.Result
}

// TestOneAnonymousClientDoesNotTakeEveryonesParkedCalls: without auth
// every caller was one ("" owner) to the per-caller bound of parked calls,
// so one client that parked eight calls and never answered left every
// other client's questions refused ("too many calls wait") for the park
// timeout. Without auth the bound is per client address, as the call
// limit is.
func TestOneAnonymousClientDoesNotTakeEveryonesParkedCalls(t *testing.T) {
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"))); err != nil {
		t.Fatal(err)
	}
	hostile, other := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	for i := range 8 {
		if res := callFrom(t, hostile, url+"/mcp", "ask_2025", ""); res["resultType"] != "input_required" {
			t.Fatalf("call %d: %v", i, res)
		}
	}
	if res := callFrom(t, hostile, url+"/mcp", "ask_2025", ""); res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "too many calls wait") {
		t.Errorf("the hostile client's ninth parked call: %v", res)
	}
	res := callFrom(t, other, url+"/mcp", "ask_2025", "")
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("another client's call was refused: %v", res)
	}
	res = callFrom(t, other, url+"/mcp", "ask_2025", `"requestState":"`+state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`)
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "accept red") {
		t.Errorf("another client's answered call: %v", res)
	}
}

// TestAParkedCallsResultIsAuditedWithItsRetry: the backend's call of a
// parked call reported its result bytes to the first request's audit
// record, which had been written already (a data race, and the retry that
// got the result was audited with none).
func TestAParkedCallsResultIsAuditedWithItsRetry(t *testing.T) {
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	var buf syncBuffer
	g, url := newGateway(t, r, gateway.Options{AuditLog: &buf})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"))); err != nil {
		t.Fatal(err)
	}
	res := callResult(t, url+"/mcp", "ask_2025", "")
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("first answer %v", res)
	}
	res = callResult(t, url+"/mcp", "ask_2025", `"requestState":"`+state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`)
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "accept red") {
		t.Fatalf("the answered call: %v", res)
	}
	var lines []auditLine
	for deadline := time.Now().Add(10 * time.Second); len(lines) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("audit lines: %s", buf.String())
		}
		time.Sleep(10 * time.Millisecond)
		lines = auditLines(t, buf.String())
	}
	if lines[0].Outcome != "input_required" || lines[1].Outcome != "ok" {
		t.Fatalf("outcomes %q, %q", lines[0].Outcome, lines[1].Outcome)
	}
	if lines[1].ResultBytes == 0 {
		t.Errorf("the retry that got the result is audited with resultBytes 0")
	}
}

// TestOneNamespaceDoesNotHoldEveryCallSlot: one tenant whose workload
// answers slowly, called often enough by that tenant, held every one of
// the gateway's call slots, and every other tenant's calls waited the call
// timeout and failed busy. A namespace now holds at most a share of the
// slots; its further calls wait for its own.
func TestOneNamespaceDoesNotHoldEveryCallSlot(t *testing.T) {
	var entered atomic.Int32
	slow := newWorkload(t, "hostile", "slow", "", toolkit.MustNew("slow", "Answers at the call timeout", func(ctx context.Context, _ struct{}) (string, error) {
		entered.Add(1)
		<-ctx.Done()
		return "", ctx.Err()
	}))
	fast := newWorkload(t, "team", "tools", "", echoTool("a"))
	const slots = 4
	g, url := newGateway(t, (&routes{}).add(slow, fast), gateway.Options{MaxConcurrentCalls: slots, CallTimeout: 5 * time.Second})
	if err := g.SetTable(table(slow.tableTools(), fast.tableTools())); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	done := make(chan struct{}, slots)
	for range slots {
		go func() {
			_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
			done <- struct{}{}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); entered.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow tool was never called")
		}
	}
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x", "count": 1}})
	if err != nil || res.IsError {
		t.Fatalf("another namespace's call while one namespace calls a slow tool %d times: %v %s", slots, err, text(res))
	}
	if n := entered.Load(); n > slots/4 {
		t.Errorf("%d calls of one namespace in flight, over its share of %d", n, slots/4)
	}
	cancel()
	for range slots {
		<-done
	}
}

// callAsFrom is callFrom with the bearer token tok.
func callAsFrom(t *testing.T, url, tok, name, extra string) map[string]any {
	t.Helper()
	return callFrom(t, &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tok}}, url, name, extra)
}

// TestAParkedCallIsItsCallersOnly: a caller who learns another's
// requestState (a shared log, a proxy) and may call the same tool cannot
// answer the other's parked call nor take its result; the call stays
// parked for its own caller, who gets the result.
func TestAParkedCallIsItsCallersOnly(t *testing.T) {
	r := new(routes)
	r.set("ask25.apps.svc.cluster.local:8080", mcpBackend(t, askingServer2025(), false))
	f := newFakeAPI()
	alice, mallory := f.token("alice"), f.token("mallory")
	f.grant("alice", "apps", "ask_2025")
	f.grant("mallory", "apps", "ask_2025")
	g, url := newGateway(t, r, gateway.Options{Auth: &gateway.KubernetesAuth{Client: f}})
	if err := g.SetTable(table(mcpTableTools("apps", "ask25", "/mcp", "ask_2025"))); err != nil {
		t.Fatal(err)
	}
	res := callAsFrom(t, url+"/mcp", alice, "ask_2025", "")
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("alice's first answer %v", res)
	}
	res = callAsFrom(t, url+"/mcp", mallory, "ask_2025", `"requestState":"`+state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"mallory"}}},`)
	if res["isError"] != true || strings.Contains(fmt.Sprint(res["content"]), "accept") {
		t.Errorf("mallory's retry with alice's state: %v", res)
	}
	res = callAsFrom(t, url+"/mcp", alice, "ask_2025", `"requestState":"`+state+`","inputResponses":{"toolplane":{"action":"accept","content":{"color":"red"}}},`)
	if res["isError"] == true || fmt.Sprint(res["content"]) != fmt.Sprint([]any{map[string]any{"type": "text", "text": "accept red"}}) {
		t.Errorf("alice's retry: %v", res)
	}
}

// TestAToolSetTokenEchoedInAResultIsNotShown: a workload that echoes the
// header it got (a debugging tool, a careless error) showed its ToolSet's
// token to every caller, who could then call the workload past the
// gateway's authorization. The gateway now redacts it from results and
// relayed notifications, as it did from its own errors.
func TestAToolSetTokenEchoedInAResultIsNotShown(t *testing.T) {
	const token = "tenant-s3cret-token"
	s := mcp.NewServer(&mcp.Implementation{Name: "careless"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		got := req.Extra.Header.Get("Authorization")
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Message: "you sent " + got})
		}
		// A level is no JSON data the gateway redacts: the SDK takes one it
		// does not know for debug, and relayed it as it came.
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(got), Logger: "careless", Data: "level"})               //nolint:staticcheck // relays the deprecated logging on purpose
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "careless", Data: map[string]any{"authorization": got}}) //nolint:staticcheck // relays the deprecated logging on purpose
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + got}}}, map[string]any{"authorization": got}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "you sent " + req.Extra.Header.Get("Authorization"), RequestedSchema: askSchema})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
	})
	url := carelessBackend(t, token, s, "whoami", "ask")
	// A question for the user, relayed to a 2025 client in its session.
	var asked atomic.Value
	ask := connectWith(t, url+"/mcp", "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Store(req.Params.Message)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	if res, err := ask.CallTool(bounded(t), &mcp.CallToolParams{Name: "ask"}); err != nil || res.IsError {
		t.Fatalf("%v %s", err, text(res))
	}
	if m, _ := asked.Load().(string); !strings.HasPrefix(m, "you sent ") || strings.Contains(m, token) {
		t.Errorf("the client was asked %q", m)
	}
	var h heard
	cs := connectWith(t, url+"/mcp", "2026-07-28", h.options(nil))
	res := callWithProgress(t, cs, "2026-07-28", "whoami", nil)
	if res.IsError {
		t.Fatal(text(res))
	}
	progress, logs := h.await(t, 1, 1)
	if len(progress) != 1 || len(logs) != 1 {
		t.Fatalf("heard %d progress and %d log notifications, want 1 and 1", len(progress), len(logs))
	}
	for _, n := range []any{progress[0], logs[0]} {
		if b, _ := json.Marshal(n); strings.Contains(string(b), token) {
			t.Errorf("a caller heard the ToolSet's token: %s", b)
		}
	}
	if !strings.HasPrefix(text(res), "you sent Bearer ") {
		t.Fatalf("the workload did not echo its header, the check proves nothing: %s", text(res))
	}
	shown, _ := json.Marshal(res)
	if strings.Contains(string(shown), token) {
		t.Errorf("a caller was shown the ToolSet's token: %s", shown)
	}

	// A caller who asks for every log hears the one at a level MCP does
	// not have only as refused: the level is not passed on.
	var all heard
	cs = connectWith(t, url+"/mcp", "2026-07-28", all.options(nil))
	params := &mcp.CallToolParams{Name: "whoami", Meta: mcp.Meta{mcp.MetaKeyLogLevel: "debug"}} //nolint:staticcheck // asks for the deprecated logging on purpose
	if res, err := cs.CallTool(bounded(t), params); err != nil || res.IsError {
		t.Fatalf("%v %s", err, text(res))
	}
	if _, logs := all.await(t, 0, 1); len(logs) == 0 {
		t.Fatal("the caller at level debug heard no log")
	}
	_, logs = all.settled(t)
	for _, l := range logs {
		if b, _ := json.Marshal(l); strings.Contains(string(b), token) || l.Level != "info" {
			t.Errorf("a caller heard a log at a level MCP does not have: %s", b)
		}
	}
}

// TestSearchSessionsAreBoundedAsOthersAre: a 2025-era session opened at
// /mcp/search skipped the session bounds (per client, per caller, in all)
// and the session lifetime that /mcp applies, so one client could open
// sessions there without end.
func TestSearchSessionsAreBoundedAsOthersAre(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{Sessions: true, MaxSessionsPerClient: 2})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	// Each path from an address of its own.
	for path, ip := range map[string]string{"/mcp/search": "127.0.0.2", "/mcp/namespaces/team/search": "127.0.0.3"} {
		hc := clientFrom(ip)
		t.Run(path, func(t *testing.T) {
			var status []int
			for range 4 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+path, strings.NewReader(
					`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = append(status, resp.StatusCode)
				if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
					t.Cleanup(func() {
						req, _ := http.NewRequest(http.MethodDelete, url+path, nil)
						req.Header.Set("Mcp-Session-Id", id)
						if resp, err := hc.Do(req); err == nil {
							resp.Body.Close()
						}
					})
				}
			}
			if status[0] != http.StatusOK || status[3] != http.StatusTooManyRequests {
				t.Errorf("four sessions from one address at %s: statuses %v, want the last refused (429)", path, status)
			}
		})
	}
}

// The gateway's look at a request's method must read it as the SDK does:
// encoding/json matches keys whatever their case and keeps the last, the
// SDK's decoder matches "method" only. A body with "method" and, after it,
// "Method" was a subscriptions/listen stream to the SDK and something else
// to the gateway's bounds: no stream slot, no stream lifetime.
func TestAStreamDisguisedByAKeysCaseIsStillBounded(t *testing.T) {
	g, url := newGateway(t, nil, gateway.Options{MaxStreamsPerClient: 1})
	if err := g.SetTable(table()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	first := listen(t, ctx, url+"/mcp")
	defer first.Body.Close()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("a stream within the bound: status %d", first.StatusCode)
	}
	for _, disguise := range []string{`"Method":"ping"`, `"METHOD":"tools/list"`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + meta2026 +
			`,"notifications":{"toolsListChanged":true}},` + disguise + `}`
		resp := post(t, ctx, url+"/mcp", "2026-07-28", "subscriptions/listen", body)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a second stream with %s: status %d, want 429 (the stream bound was skipped)", disguise, resp.StatusCode)
		}
		resp.Body.Close()
	}
}

// liarTaskServer is a hostile MCP server: it creates a task with the
// one-letter id "a", and answers tasks/get with an error whose message is
// n letters "a".
func liarTaskServer(t *testing.T, n int) string {
	t.Helper()
	return rawTaskServer(t, "liar", func(method string) (json.RawMessage, *jsonrpc.Error) {
		if method == "tools/call" {
			return json.RawMessage(`{"task":{"taskId":"a","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}`), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: strings.Repeat("a", n)}
	})
}

// rawTaskServer starts a hostile task backend of the 2025-11-25 era, named
// name, that answers initialize as a server of tasks and every other call
// with answer's result or error, as fixed JSON that no SDK would write,
// and returns its address.
func rawTaskServer(t *testing.T, name string, answer func(method string) (json.RawMessage, *jsonrpc.Error)) string {
	t.Helper()
	srv := httptest.NewServer(rawTaskHandler(name, answer))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// rawTaskHandler is rawTaskServer's handler.
func rawTaskHandler(name string, answer func(method string) (json.RawMessage, *jsonrpc.Error)) http.Handler {
	return rawRequestHandler(name, func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) { return answer(req.Method) })
}

// A backend's error for a task names its own task id, which the gateway
// replaces with the client's sealed one, a hundred-odd bytes: it did so in
// the whole message before clipping it, and a backend whose task id is one
// letter and whose message is a megabyte of it made the gateway build a
// hundred megabytes for one tasks/get.
func TestABackendsTaskErrorIsNotAmplified(t *testing.T) {
	const n = 1 << 20
	r := new(routes)
	r.set("liar.apps.svc.cluster.local:8080", liarTaskServer(t, n))
	tools := mcpTableTools("apps", "liar", "/mcp", "liar_task")
	tools[0].Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional}
	g, url := newGateway(t, r, gateway.Options{MaxResultBytes: 2 << 20})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	created := postRPC(t, url+"/mcp", "2025-11-25", "tools/call", `{"name":"liar_task","arguments":{},"task":{"ttl":60000}}`)
	res, _ := created["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if !strings.HasPrefix(id, "tpt1.") {
		t.Fatalf("no sealed task: %v", created)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	reply := postRPC(t, url+"/mcp", "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`)
	runtime.ReadMemStats(&after)
	e, _ := reply["error"].(map[string]any)
	if msg := fmt.Sprint(e["message"]); !strings.Contains(msg, id) || len(msg) > 2048 {
		t.Errorf("the backend's error came back as %.200q (%d bytes), want it clipped, naming the client's id", msg, len(msg))
	}
	// The 1 MiB reply is read, decoded and copied a few times; the
	// replacement in all of it would be over 100 MiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 40<<20 {
		t.Errorf("one tasks/get allocated %d MiB in the process", got>>20)
	}
}

// workingTaskServer is an MCP server whose tasks are working forever; it
// counts the tasks/get requests it is sent.
func workingTaskServer(t *testing.T, gets *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !req.IsCall() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		task := `{"taskId":"t-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":600000}`
		resp := &jsonrpc.Response{ID: req.ID}
		switch req.Method {
		case "initialize":
			resp.Result = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"working","version":"1"}}`)
		case "tools/call":
			resp.Result = json.RawMessage(`{"task":` + task + `}`)
		case "tasks/get":
			gets.Add(1)
			resp.Result = json.RawMessage(task)
		default:
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
		}
		b, _ := jsonrpc.EncodeMessage(resp)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// switchAuth takes the bearer token for the user's name, and allows every
// call while allowed holds.
type switchAuth struct{ allowed *atomic.Bool }

func (switchAuth) Authenticate(_ context.Context, token string) (*gateway.Caller, error) {
	return &gateway.Caller{User: token}, nil
}

func (a switchAuth) Allowed(context.Context, *gateway.Caller, string, string) (bool, error) {
	return a.allowed.Load(), nil
}

// A caller at its bound of tasks has its counted tasks' backends asked
// whether they have ended (reclaimTasks): the gateway did so, with a
// Txn-Token-bearing request in the caller's name, for tasks of a tool the
// caller may no longer call, or of a ToolSet that was deleted and made
// again under the same name. Such a task cannot be reached by its caller
// any more (taskMethod finds it not found): it stops counting, and its
// backend is not asked.
func TestReclaimAsksNoBackendForATaskItsCallerCannotReach(t *testing.T) {
	var gets atomic.Int64
	r := new(routes)
	r.set("working.apps.svc.cluster.local:8080", workingTaskServer(t, &gets))
	tools := mcpTableTools("apps", "working", "/mcp", "work")
	tools[0].Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional}
	tools[0].ToolSetUID = "uid-1"
	var allowed atomic.Bool
	allowed.Store(true)
	g, url := newGateway(t, r, gateway.Options{MaxTasksPerCaller: 1, Auth: switchAuth{&allowed}})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	call := func() map[string]any {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"work","arguments":{},"task":{"ttl":600000}}}`
		req, _ := http.NewRequestWithContext(bounded(t), http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return replyOf(t, resp)
	}
	if res, _ := call()["result"].(map[string]any); res["task"] == nil {
		t.Fatal("no task created")
	}
	// At the bound, while allowed: the backend is asked, the task works on.
	call()
	if n := gets.Load(); n != 1 {
		t.Fatalf("%d tasks/get at the bound, want 1", n)
	}
	allowed.Store(false)
	call()
	if n := gets.Load(); n != 1 {
		t.Errorf("the backend of a tool alice may no longer call was asked about her task (%d tasks/get)", n-1)
	}
	// And the ToolSet made again under the same name: the old task is
	// not its.
	allowed.Store(true)
	tools[0].ToolSetUID = "uid-2"
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	before := gets.Load()
	if res, _ := call()["result"].(map[string]any); res["task"] == nil {
		t.Errorf("a new task of the new ToolSet was refused: the old one still counts")
	}
	if n := gets.Load(); n != before {
		t.Errorf("the new ToolSet's backend was asked about the old one's task (%d tasks/get)", n-before)
	}
}

// Held: a task id given on one view is not found on a view without its
// tool, and its backend is not asked.
func TestATaskIsNotReachedThroughAnotherView(t *testing.T) {
	var gets atomic.Int64
	r := new(routes)
	r.set("working.apps.svc.cluster.local:8080", workingTaskServer(t, &gets))
	tools := mcpTableTools("apps", "working", "/mcp", "work")
	tools[0].Execution = &spec.Execution{TaskSupport: spec.TaskSupportOptional}
	other := newWorkload(t, "other", "kit", "kit_", echoTool("kit"))
	r.add(other)
	g, url := newGateway(t, r, gateway.Options{})
	if err := g.SetTable(table(tools, other.tableTools())); err != nil {
		t.Fatal(err)
	}
	created := postRPC(t, url+"/mcp/namespaces/apps", "2025-11-25", "tools/call", `{"name":"work","arguments":{},"task":{"ttl":60000}}`)
	res, _ := created["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("no task: %v", created)
	}
	for _, path := range []string{"/mcp/namespaces/other", "/mcp/toolsets/other/kit", "/mcp/toolsets/apps/someone-else"} {
		reply := postRPC(t, url+path, "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`)
		if e, _ := reply["error"].(map[string]any); !strings.Contains(fmt.Sprint(e["message"]), "task not found") {
			t.Errorf("%s: %v", path, reply)
		}
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("the backend was asked %d times", n)
	}
	if reply := postRPC(t, url+"/mcp", "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`); reply["result"] == nil || gets.Load() != 1 {
		t.Errorf("on a view with the tool: %v", reply)
	}
}

// A ToolSet's token is redacted from what its workload returns by a
// replacement of every occurrence with "[redacted]": a tenant whose token
// is one letter, and whose tool returns a megabyte of it, made the
// gateway build and send ten megabytes, past the reply bound
// (MaxResultBytes) and the memory budget that counts replies at their
// size. A result that redaction would grow past the bound is withheld.
func TestRedactionDoesNotGrowAResultPastTheBound(t *testing.T) {
	const (
		host  = "short.tenant.svc.cluster.local"
		token = "q"
	)
	ca := newPrivateCA(t)
	cert := ca.serving(t, host)
	s := mcp.NewServer(&mcp.Implementation{Name: "short"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "qs"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(token, 1<<20)}}}, nil, nil
	})
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r := new(routes)
	r.set(host+":8443", srv.Listener.Addr().String())
	creds := kubernetesCredentials(t, credentialObjects("tenant", "short", "https", token, ca.pem)...)
	const limit = 2 << 20
	g, url := newGateway(t, r, gateway.Options{Credentials: creds, CallTimeout: 10 * time.Second, MaxResultBytes: limit})
	if err := g.SetTable(table([]spec.TableTool{secureTableTool("tenant", "short", "qs", "https://"+host+":8443/mcp")})); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, nil)
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "qs"})
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := json.Marshal(res)
	if len(shown) > limit {
		t.Errorf("the caller was sent a result of %d bytes for a reply bound of %d", len(shown), limit)
	}
	if !res.IsError {
		t.Errorf("the result is not withheld: %.200s", shown)
	}
}

// A ToolSet's token was redacted from a task's answers after the gateway
// had written its own words into them. A workload whose token is in the
// sealed task id (here "tpt1", the prefix of every one) had the client's
// id come out as "[redacted].…", so the client could never ask for its
// task again; one that repeated its token until the answer was withheld
// took the gateway's related-task and serverInfo with it; a backend's
// error that named its task came out with the client's id redacted too.
// Redaction now runs on the backend's reply as it was sent, and on an
// error's words around the id.
func TestTaskAnswersAreRedactedBeforeTheGatewaysOwnWords(t *testing.T) {
	const token = "tpt1"
	task := `{"taskId":"b-1","status":"working","statusMessage":"key tpt1","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	url := redactRig(t, token, rawTaskHandler("tasker", func(method string) (json.RawMessage, *jsonrpc.Error) {
		switch method {
		case "tools/call":
			return json.RawMessage(`{"task":` + task + `}`), nil
		case "tasks/get":
			return json.RawMessage(task), nil
		case "tasks/result":
			return json.RawMessage(`{"content":[{"type":"text","text":"the key is tpt1"}]}`), nil
		case "tasks/cancel":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task b-1 has ended (key tpt1)"}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{})
	// leaks reports the token anywhere in an answer but in the sealed id.
	leaks := func(what string, answer map[string]any, id string) {
		t.Helper()
		b, _ := json.Marshal(answer)
		if strings.Contains(strings.ReplaceAll(string(b), id, ""), token) {
			t.Errorf("%s: the token reached the client: %s", what, b)
		}
	}

	created := postRPC(t, url, "2025-11-25", "tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`)
	res, _ := created["result"].(map[string]any)
	view, _ := res["task"].(map[string]any)
	id, _ := view["taskId"].(string)
	if !strings.HasPrefix(id, "tpt1.") {
		t.Fatalf("the client's task id is %q, not the sealed one: %v", id, created)
	}
	if view["statusMessage"] != "key [redacted]" {
		t.Errorf("the created task's status message is %v", view["statusMessage"])
	}
	leaks("tools/call", created, id)

	get := postRPC(t, url, "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`)
	status, _ := get["result"].(map[string]any)
	if status["taskId"] != id || status["statusMessage"] != "key [redacted]" {
		t.Errorf("tasks/get with the sealed id: %v", get)
	}
	leaks("tasks/get", get, id)

	reply := postRPC(t, url, "2025-11-25", "tasks/result", `{"taskId":"`+id+`"}`)
	result, _ := reply["result"].(map[string]any)
	content, _ := result["content"].([]any)
	if first, _ := firstOf(content).(map[string]any); first["text"] != "the key is [redacted]" {
		t.Errorf("tasks/result: %v", reply)
	}
	meta, _ := result["_meta"].(map[string]any)
	if related, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any); related["taskId"] != id {
		t.Errorf("the result's related task is %v, want the client's %s", meta, id)
	}
	leaks("tasks/result", reply, id)

	// The backend's error names its task, which the client knows by the
	// sealed id: the token is redacted around the id, not in it.
	canceled := postRPC(t, url, "2025-11-25", "tasks/cancel", `{"taskId":"`+id+`"}`)
	if e, _ := canceled["error"].(map[string]any); e["message"] != "task "+id+" has ended (key [redacted])" {
		t.Errorf("tasks/cancel: %v", canceled)
	}
	leaks("tasks/cancel", canceled, id)
}

// firstOf is s[0], or nil.
func firstOf(s []any) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

// The same short token in a relayed notification: a progress message or
// a log of 15 KiB of it, under the 16 KiB bound of a notification, went to
// the caller as 150 KiB. A notification is measured as it is sent.
func TestRedactionDoesNotGrowANotificationPastTheBound(t *testing.T) {
	const (
		host  = "chatty.tenant.svc.cluster.local"
		token = "q"
	)
	ca := newPrivateCA(t)
	cert := ca.serving(t, host)
	s := mcp.NewServer(&mcp.Implementation{Name: "chatty"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "chat"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		big := strings.Repeat(token, 15<<10)
		if pt := req.Params.GetProgressToken(); pt != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: pt, Progress: 1, Message: big})
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: pt, Progress: 2, Message: "end"})
		}
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: big})   //nolint:staticcheck // relays the deprecated logging on purpose
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: "end"}) //nolint:staticcheck // relays the deprecated logging on purpose
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r := new(routes)
	r.set(host+":8443", srv.Listener.Addr().String())
	creds := kubernetesCredentials(t, credentialObjects("tenant", "chatty", "https", token, ca.pem)...)
	g, url := newGateway(t, r, gateway.Options{Credentials: creds, CallTimeout: 10 * time.Second})
	if err := g.SetTable(table([]spec.TableTool{secureTableTool("tenant", "chatty", "chat", "https://"+host+":8443/mcp")})); err != nil {
		t.Fatal(err)
	}
	var h heard
	cs := connectWith(t, url+"/mcp", "2026-07-28", h.options(nil))
	if res := callWithProgress(t, cs, "2026-07-28", "chat", nil); res.IsError {
		t.Fatal(text(res))
	}
	h.await(t, 1, 1)
	progress, logs := h.settled(t)
	for _, n := range append(append([]any{}, anySlice(progress)...), anySlice(logs)...) {
		if b, _ := json.Marshal(n); len(b) > gateway.DefaultMaxNotificationBytes+1024 {
			t.Errorf("a caller heard a notification of %d bytes, over the bound of %d", len(b), gateway.DefaultMaxNotificationBytes)
		}
	}
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
