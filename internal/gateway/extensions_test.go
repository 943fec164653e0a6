package gateway_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/toolplane/toolplane/internal/gateway"
)

// TestExtensionsOfTheView: initialize (2025) and server/discover
// (2026-07-28) advertise the extensions that the servers of the view's
// tools advertise, of those the gateway relays (--relay-extension) only:
// one with methods of its own (MCP Apps' resources) is never advertised,
// nor a name that is not one, and without --relay-extension none is.
func TestExtensionsOfTheView(t *testing.T) {
	crm := mcpTableTools("crm", "crm-mcp", "/mcp", "crm_a", "crm_b")
	obs := mcpTableTools("obs", "obs-mcp", "/mcp", "obs_a")
	plain := mcpTableTools("ops", "ops-mcp", "/mcp", "ops_a")
	crmExt := []string{"com.example/annotate", "io.modelcontextprotocol/ui"}
	for i := range crm {
		crm[i].Extensions = crmExt
	}
	obs[0].Extensions = []string{"com.example/costs", "io.modelcontextprotocol/ui"}
	tbl := table(crm, obs, plain)

	for _, tc := range []struct {
		name  string
		relay []string
		want  map[string][]string // endpoint path → extensions
	}{
		{"relayed", []string{"com.example/annotate", "com.example/costs", "not a name"}, map[string][]string{
			"/mcp":                              {"com.example/annotate", "com.example/costs"},
			gateway.NamespaceViewPrefix + "crm": {"com.example/annotate"},
			gateway.ToolSetViewPrefix + "obs/obs-mcp": {"com.example/costs"},
			gateway.NamespaceViewPrefix + "ops":       nil,
		}},
		{"none relayed", nil, map[string][]string{"/mcp": nil, gateway.NamespaceViewPrefix + "crm": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, url := newGateway(t, new(routes), gateway.Options{RelayExtensions: tc.relay, Sessions: true})
			if err := g.SetTable(tbl); err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.want {
				for _, era := range eras {
					cs := connect(t, url+path, era, nil, nil)
					caps := cs.InitializeResult().Capabilities
					got := slices.Sorted(maps.Keys(caps.Extensions))
					if !slices.Equal(got, want) {
						t.Errorf("%s %s: extensions %q, want %q", era, path, got, want)
					}
					if caps.Tools == nil || !caps.Tools.ListChanged {
						t.Errorf("%s %s: the other capabilities changed: %+v", era, path, caps)
					}
				}
			}
			// The SDK's own capabilities, which every answer starts from,
			// are left as they were.
			cs := connect(t, url+gateway.NamespaceViewPrefix+"ops", eras[0], nil, nil)
			if ext := cs.InitializeResult().Capabilities.Extensions; len(ext) != 0 {
				t.Errorf("after the other views, ops has %v", ext)
			}
		})
	}
}
