package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type weatherIn struct {
	City  string `json:"city" description:"City name, e.g. Paris, France"`
	Units string `json:"units,omitempty" tool:"enum=metric|imperial" default:"metric"`
}

type weatherOut struct {
	City  string  `json:"city"`
	Units string  `json:"units"`
	Temp  float64 `json:"temp"`
}

// weatherService is the Service of toolkitWorkload's ToolSet.
const weatherService = "http://weather-tools.weather.svc.cluster.local:8080"

// toolkitWorkload serves a registry with toolkit's real HTTP server, and
// returns the table the operator would publish for it: its spec document's
// tools, with invoke endpoints on the server, plus a tool the server does
// not serve.
func toolkitWorkload(t *testing.T) (*spec.Table, *http.Client) {
	t.Helper()
	reg := &toolkit.Registry{Logger: slog.New(slog.DiscardHandler)}
	err := reg.Add(
		toolkit.MustNew("get_weather", "Current weather of a city.", func(_ context.Context, in weatherIn) (weatherOut, error) {
			return weatherOut{City: in.City, Units: in.Units, Temp: 21.5}, nil
		}),
		toolkit.MustNew("billing.get.invoice", "Fetches an invoice.", func(_ context.Context, in struct {
			ID string `json:"id"`
		}) (string, error) {
			return "invoice " + in.ID, nil
		}),
		toolkit.MustNewAction("fail", "Always fails.", func(context.Context, struct{}) error {
			return errors.New("the backend is down")
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The client dials loopback with the Service's name as Host, as a
	// sidecar proxy would.
	h := server.New(reg, &server.Options{Name: "weather-tools", MaxBodyBytes: 1 << 10, Logger: slog.New(slog.DiscardHandler), AllowAnyHostOnLoopback: true})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })

	resp, err := http.Get(srv.URL + spec.DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc spec.Document
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var tools []spec.TableTool
	for _, st := range append(doc.Tools, spec.Tool{Name: "gone", InputSchema: json.RawMessage(`{"type":"object"}`)}) {
		tools = append(tools, spec.TableTool{
			Name: st.Name, SourceName: st.Name, Description: st.Description,
			InputSchema: st.InputSchema, OutputSchema: st.OutputSchema, Annotations: st.Annotations, Meta: st.Meta,
			ToolSet:   spec.ObjectReference{Namespace: "weather", Name: "weather-tools"},
			Endpoints: &spec.Endpoints{Invoke: weatherService + spec.InvokePrefix + st.Name, MCP: weatherService + spec.MCPPath},
		})
	}
	return &spec.Table{Tools: tools}, clusterHTTP(srv)
}

// TestCallToolkitServer closes the loop against toolkit's own server: the
// table goes through the ConfigMap encoding and a mounted volume, the model
// is offered strict tools, and its calls reach the Go functions.
func TestCallToolkitServer(t *testing.T) {
	table, hc := toolkitWorkload(t)
	files, _, _ := encode(t, table.Tools)
	vol := &kubeletVolume{dir: t.TempDir()}
	vol.write(t, files)
	c := &discovery.Client{HTTPClient: hc}
	if err := c.LoadDir(vol.dir); err != nil {
		t.Fatal(err)
	}
	fns := map[string]discovery.OpenAIFunction{}
	for _, tool := range c.OpenAITools(true) {
		fns[tool.Function.Name] = tool.Function
	}
	weather := fns["get_weather"]
	if !weather.Strict {
		t.Fatalf("get_weather was not exported strict: %s", weather.Parameters)
	}
	if err := validate(t, compile(t, weather.Parameters), `{"city":"Oslo","units":null}`); err != nil {
		t.Fatalf("a strict-mode call does not validate: %v", err)
	}
	ctx := t.Context()

	t.Run("strict-mode arguments", func(t *testing.T) {
		res, err := c.Call(ctx, "get_weather", `{"city":"Oslo","units":null}`)
		if err != nil {
			t.Fatal(err)
		}
		var out weatherOut
		if err := json.Unmarshal(res.StructuredContent, &out); err != nil || res.IsError {
			t.Fatalf("result %+v: %v", res, err)
		}
		if out != (weatherOut{City: "Oslo", Units: "metric", Temp: 21.5}) {
			t.Fatalf("got %+v; want the default units for the null", out)
		}
	})
	t.Run("mapped name", func(t *testing.T) {
		fn := discovery.MappedName("billing.get.invoice")
		if _, ok := fns[fn]; !ok {
			t.Fatalf("no exported function %s", fn)
		}
		res, err := c.Call(ctx, fn, map[string]string{"id": "7"})
		if err != nil || res.IsError || res.Text() != "invoice 7" {
			t.Fatalf("Call(%s) = %+v, %v", fn, res, err)
		}
	})
	t.Run("argument error is a result", func(t *testing.T) {
		res, err := c.Call(ctx, "get_weather", `{"units":"kelvin"}`)
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "city") {
			t.Fatalf("Call = %+v, %v; want an isError result that names city", res, err)
		}
	})
	t.Run("text that is not JSON is an argument error result", func(t *testing.T) {
		res, err := c.Call(ctx, "get_weather", "this is not JSON {")
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "not JSON") {
			t.Fatalf("Call = %+v, %v; want an isError result that says it is not JSON", res, err)
		}
	})
	t.Run("tool error is a result", func(t *testing.T) {
		res, err := c.Call(ctx, "fail", nil)
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "the backend is down") {
			t.Fatalf("Call = %+v, %v", res, err)
		}
	})
	for name, tc := range map[string]struct {
		tool string
		args any
		code string
		is   error
	}{
		"404": {"gone", nil, "tool_not_found", discovery.ErrToolNotFound},
		"413": {"get_weather", map[string]string{"city": strings.Repeat("x", 2<<10)}, "body_too_large", discovery.ErrRequestTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Call(ctx, tc.tool, tc.args)
			var he *discovery.HTTPError
			if !errors.As(err, &he) || he.Detail.Code != tc.code || !errors.Is(err, tc.is) {
				t.Fatalf("err = %v; want an HTTPError %s matching %v", err, tc.code, tc.is)
			}
		})
	}
}
