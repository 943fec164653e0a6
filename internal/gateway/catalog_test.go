package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func getPage(t testing.TB, u, token string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, u, nil)
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
	return resp.StatusCode, string(b), resp.Header
}

func TestCatalogPages(t *testing.T) {
	f := newSearchFixture(t, gateway.Options{})

	code, body, h := getPage(t, f.url+"/catalog?q="+url.QueryEscape("weather forecast"), "")
	if code != http.StatusOK || !strings.Contains(body, `href="/catalog/tool?name=weather_forecast"`) || !strings.Contains(body, "weather/weather-tools") {
		t.Fatalf("search page %d:\n%s", code, body)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "style-src 'sha256-", "form-action 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(body, "<script") || strings.Contains(body, "http://") && strings.Contains(body, "<link") {
		t.Errorf("the page loads something: CSP %q", csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("headers %v", h)
	}

	// Without a query, every tool by name.
	_, body, _ = getPage(t, f.url+"/catalog", "")
	for _, tt := range f.tbl.Tools {
		if !strings.Contains(body, "name="+tt.Name+`"`) {
			t.Errorf("the catalog does not list %s", tt.Name)
		}
	}

	// A tool's page: description, owner, endpoints, parameters, schema.
	code, body, _ = getPage(t, f.url+"/catalog/tool?name=weather_forecast", "")
	for _, want := range []string{"The weather forecast of a city", "weather/weather-tools", "http://weather-tools.weather.svc.cluster.local:8080/tools/weather_forecast",
		"http://weather-tools.weather.svc.cluster.local:8080/mcp", "The city, in any language", "How many days ahead", "maximum 7", "required", "&#34;properties&#34;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the tool page lacks %q (%d):\n%s", want, code, body)
		}
	}
	if code, _, _ := getPage(t, f.url+"/catalog/tool?name=nope", ""); code != http.StatusNotFound {
		t.Errorf("an unknown tool's page: %d", code)
	}
	if code, _, _ := getPage(t, f.url+"/catalog/elsewhere", ""); code != http.StatusNotFound {
		t.Errorf("an unknown page: %d", code)
	}
	if code, _, _ := getPage(t, f.url+"/catalog?q="+strings.Repeat("x", gateway.MaxQueryBytes+1), ""); code != http.StatusBadRequest {
		t.Errorf("an overlong query: %d", code)
	}
}

// TestCatalogEscapesWhatTenantsWrite: a tool's description and schema are
// a tenant's input, and the page shows them as text.
func TestCatalogEscapesWhatTenantsWrite(t *testing.T) {
	evil := `<script>alert(1)</script><img src=x onerror=alert(2)>`
	tools := []spec.TableTool{{
		Name: "evil_tool", SourceName: "evil_tool", Description: "Finds evil " + evil,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x` + "\\u003c" + `b":{"type":"string","description":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}}}`),
		ToolSet:     spec.ObjectReference{Namespace: "evil", Name: "evil"},
		Endpoints:   &spec.Endpoints{Invoke: "http://evil.elsewhere.svc:8080/tools/evil_tool"},
	}}
	g, u := newGateway(t, nil, gateway.Options{})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/catalog", "/catalog?q=evil", "/catalog/tool?name=evil_tool"} {
		_, body, _ := getPage(t, u+page, "")
		if strings.Contains(body, "<script") || strings.Contains(body, "<img") || strings.Contains(body, "<b") && !strings.Contains(body, "<body") {
			t.Errorf("%s shows markup a tenant wrote:\n%s", page, body)
		}
		if !strings.Contains(body, "evil_tool") {
			t.Errorf("%s does not show the tool", page)
		}
	}
	// The endpoint is in another namespace: the catalog says it cannot be
	// routed, and why.
	_, body, _ := getPage(t, u+"/catalog/tool?name=evil_tool", "")
	if !strings.Contains(body, "Unroutable") || !strings.Contains(body, "is not a Service of namespace evil") {
		t.Errorf("the tool page does not say why the tool is unroutable:\n%s", body)
	}
}

func TestCatalogShowsOnlyWhatTheCallerMayCall(t *testing.T) {
	auth := grants{of: map[string][]string{"one": {"crm/crm_query_customer"}, "none": {}}}
	f := newSearchFixture(t, gateway.Options{Auth: auth})
	for _, page := range []string{"/catalog", "/catalog?q=" + url.QueryEscape("weather forecast customer refund order echo")} {
		code, body, h := getPage(t, f.url+page, "one")
		if code != http.StatusOK || !strings.Contains(body, "crm_query_customer") || !strings.Contains(h.Get("Cache-Control"), "private") {
			t.Errorf("%s for one: %d %v\n%s", page, code, h, body)
		}
		for _, other := range []string{"crm_refund_order", "crm_echo", "weather_forecast"} {
			if strings.Contains(body, other) {
				t.Errorf("%s shows one %s", page, other)
			}
		}
		_, body, _ = getPage(t, f.url+page, "none")
		for _, tt := range f.tbl.Tools {
			if strings.Contains(body, tt.Name) {
				t.Errorf("%s shows none %s", page, tt.Name)
			}
		}
	}
	if code, _, _ := getPage(t, f.url+"/catalog/tool?name=crm_query_customer", "one"); code != http.StatusOK {
		t.Errorf("one's own tool page: %d", code)
	}
	if code, body, _ := getPage(t, f.url+"/catalog/tool?name=crm_refund_order", "one"); code != http.StatusNotFound || strings.Contains(body, "Refunds") {
		t.Errorf("an ungranted tool's page: %d\n%s", code, body)
	}
	if code, _, _ := getPage(t, f.url+"/catalog", ""); code != http.StatusUnauthorized {
		t.Errorf("the catalog without a token: %d", code)
	}
}
