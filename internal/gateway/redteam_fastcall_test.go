package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Attacks on the fast path of tools/call (fastcall.go, envelope.go) by a
// hostile caller and a hostile workload. Each compares the fast path with
// the SDK's (gateway.SetFastCall), or holds it to a bound.

// rtGateway is one gateway of a pair, with its audit log.
type rtGateway struct {
	g     *gateway.Gateway
	url   string
	audit *syncBuffer
}

// rtPair returns two gateways over r serving tbl with opts: one with the
// fast path off, one with it on.
func rtPair(t *testing.T, r *routes, tbl *spec.Table, opts gateway.Options) (sdk, fast *rtGateway) {
	t.Helper()
	var pair [2]*rtGateway
	for i := range pair {
		o := opts
		buf := &syncBuffer{}
		o.AuditLog = buf
		g, url := newGateway(t, r, o)
		gateway.SetFastCall(g, i == 1)
		if err := g.SetTable(tbl); err != nil {
			t.Fatal(err)
		}
		pair[i] = &rtGateway{g: g, url: url, audit: buf}
	}
	return pair[0], pair[1]
}

// auditOf closes g, which writes out its audit lines, and returns them.
func (g *rtGateway) auditOf(t *testing.T) []auditLine {
	t.Helper()
	_ = g.g.Close()
	return auditLines(t, g.audit.String())
}

// rtPost posts body to url with header, and gives up after timeout.
func rtPost(t *testing.T, url string, header map[string]string, body string, timeout time.Duration) (rawAnswer, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rawAnswer{}, time.Since(start), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return rawAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), CacheControl: resp.Header.Get("Cache-Control"), Body: string(b)}, time.Since(start), err
}

// rawWorkload serves the tool "raw" of ToolSet apps/raw, whose reply to
// the arguments {"case":n} is replies[n], byte for byte.
func rawWorkload(t *testing.T, r *routes, replies []string) []spec.TableTool {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var in struct{ Case int }
		if json.NewDecoder(req.Body).Decode(&in) != nil || in.Case < 0 || in.Case >= len(replies) {
			http.Error(w, "no such case", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, replies[in.Case])
	}))
	t.Cleanup(srv.Close)
	r.set("raw.apps.svc.cluster.local:8080", srv.Listener.Addr().String())
	return []spec.TableTool{{
		Name: "raw", SourceName: "raw", InputSchema: json.RawMessage(`{"type":"object"}`),
		ToolSet:   spec.ObjectReference{Namespace: "apps", Name: "raw"},
		Endpoints: &spec.Endpoints{Invoke: "http://raw.apps.svc.cluster.local:8080" + spec.InvokePrefix + "raw"},
	}}
}

// manyMembers is prefix, then distinct members "k0":0,"k1":0,… until the
// text is size bytes long, then suffix.
func manyMembers(prefix string, size int, suffix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; b.Len() < size; i++ {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString(suffix)
	return b.String()
}

// TestRedteamManyMembersCostWhatTheSDKCosts: an object of many distinct
// members (in the request's envelope, in a tools/call's params, or in a
// workload's result) costs the gateway about what the same bytes cost in
// one string. It failed before its fix: the fast path's objectMembers
// compared each key of a tools/call's params with every key before it, and
// params of 256 KiB took seconds of CPU (a hundred times the SDK's
// decoder; 1 MiB took a minute and a half). The plain envelope and result
// readers the fast path had for a while (envelope.go) did the same, at
// every MCP POST and every workload's result; the envelope and result
// cases guard against their return.
func TestRedteamManyMembersCostWhatTheSDKCosts(t *testing.T) {
	const size = 256 << 10
	fx := newFastFixture(t)
	r := new(routes).add(fx.crm)
	text := strings.Repeat("a", size)
	replies := []string{
		`{"content":[{"type":"text","text":"` + text + `"}]}`,
		manyMembers(`{"content":[{"type":"text","text":"x"}]`, size, `}`),
		manyMembers(`{"content":[{"type":"text","text":"x"`, size, `}]}`),
	}
	tbl := table(fx.crm.tableTools(), rawWorkload(t, r, replies))
	_, fast := rtPair(t, r, tbl, gateway.Options{})
	h := eraHeader("2025-11-25", "")
	post := func(body string, timeout time.Duration) (rawAnswer, time.Duration, error) {
		return rtPost(t, fast.url+"/mcp", h, body, timeout)
	}
	// The same bytes, in one string: of an argument, and of a result;
	// the quickest of a few tries of each, the machine being shared.
	var baseline time.Duration
	for _, body := range []string{
		callBody("2025-11-25", "1", "crm_echo", `{"text":"`+text+`"}`, ""),
		callBody("2025-11-25", "1", "raw", `{"case":0}`, ""),
	} {
		quickest := time.Minute
		for range 5 {
			a, took, err := post(body, time.Minute)
			if err != nil || a.Status != http.StatusOK {
				t.Fatalf("baseline: %v %d %.200s", err, a.Status, a.Body)
			}
			quickest = min(quickest, took)
		}
		baseline = max(baseline, quickest)
	}
	limit := time.Second + 10*baseline
	for name, body := range map[string]string{
		"envelope": manyMembers(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_echo","arguments":{"text":"x"}}`, size, `}`),
		"params":   manyMembers(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_echo","arguments":{"text":"x"}`, size, `}}`),
		"result":   callBody("2025-11-25", "1", "raw", `{"case":1}`, ""),
		"block":    callBody("2025-11-25", "1", "raw", `{"case":2}`, ""),
	} {
		a, took, err := post(body, limit)
		if err != nil {
			t.Errorf("%s of many members: no answer within %s (10 times the %s of the same bytes in a string, and a second): %v", name, limit, baseline, err)
			continue
		}
		if a.Status != http.StatusOK {
			t.Errorf("%s of many members: %d %.300s", name, a.Status, a.Body)
		}
		t.Logf("%s of many members: answered in %s (the same bytes in a string: %s)", name, took, baseline)
	}
}

// TestRedteamEmptyNameWithoutMcpNameIsRefusedAsByTheSDK: a 2026-07-28
// tools/call of the name "" without an Mcp-Name header is refused by the
// SDK's standard headers' check (-32020, no call, no audit line). It failed
// before its fix: the fast path compared the absent header, "", with the
// name, found them equal, and answered and audited a call of "".
func TestRedteamEmptyNameWithoutMcpNameIsRefusedAsByTheSDK(t *testing.T) {
	fx := newFastFixture(t)
	r := new(routes).add(fx.crm)
	sdk, fast := rtPair(t, r, table(fx.crm.tableTools()), gateway.Options{})
	h := eraHeader("2026-07-28", "")
	body := callBody("2026-07-28", "1", "", `{}`, "")
	want, _, err1 := rtPost(t, sdk.url+"/mcp", h, body, time.Minute)
	got, _, err2 := rtPost(t, fast.url+"/mcp", h, body, time.Minute)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if got != want {
		t.Errorf("the fast path answered\n%+v\nthe SDK\n%+v", got, want)
	}
	if n := gateway.FastCalls(fast.g); n != 0 {
		t.Errorf("the fast path took %d calls", n)
	}
	if a, b := sdk.auditOf(t), fast.auditOf(t); len(a) != len(b) {
		t.Errorf("audit lines: the fast path wrote %d (%+v), the SDK %d", len(b), b, len(a))
	}
}
