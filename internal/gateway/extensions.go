package gateway

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// A 2026-07-28 server advertises the extensions it serves in its
// capabilities (SEP-2133); the operator records an MCP ToolSet's in its
// table entries (spec.TableTool.Extensions: names only, at most
// spec.MaxExtensions, those every ready Pod names). The gateway
// advertises, in initialize and server/discover, the union of what the
// view's routable tools' servers advertise, but only the extensions it
// relays correctly, Options.RelayExtensions: those that only annotate
// tools and results, which pass through the gateway unchanged. The
// gateway serves tools and nothing else, so an extension with methods of
// its own (resources, tasks, ...) cannot reach its server through it, and
// is never advertised, whoever advertises it behind.
//
// A backend's settings for an extension are not passed on (they are its
// own, and two backends' need not agree): the gateway advertises {}.
// The union is the view's, not the caller's grants: an initialize is
// answered before any tool is authorized, and only a name the gateway's
// admin listed can appear.

// relayedExtensions is the set of o's RelayExtensions that are valid
// names.
func relayedExtensions(names []string) map[string]bool {
	var out map[string]bool
	for _, n := range names {
		if spec.ValidExtensionName(n) {
			if out == nil {
				out = map[string]bool{}
			}
			out[n] = true
		}
	}
	return out
}

// viewExtensions are the relayed extensions that the servers of v's tools
// in s advertise.
func (g *Gateway) viewExtensions(s *snapshot, v view) map[string]any {
	if len(g.relayExt) == 0 {
		return nil
	}
	var out map[string]any
	var last []string // entries of one ToolSet share their slice
	for _, i := range v.indexes(s) {
		ext := s.table.Tools[i].Extensions
		if len(ext) == 0 || (len(last) > 0 && &ext[0] == &last[0]) {
			continue
		}
		last = ext
		for _, name := range ext {
			if g.relayExt[name] {
				if out == nil {
					out = map[string]any{}
				}
				out[name] = map[string]any{}
			}
		}
		if len(out) == len(g.relayExt) {
			break
		}
	}
	return out
}

// withExtensions sets the view's extensions in the capabilities of an
// initialize or server/discover result, on a copy: the SDK's own are
// shared by every session.
func (g *Gateway) withExtensions(req mcp.Request, res mcp.Result) {
	var caps **mcp.ServerCapabilities
	switch r := res.(type) {
	case *mcp.InitializeResult:
		caps = &r.Capabilities
	case *mcp.DiscoverResult:
		caps = &r.Capabilities
	default:
		return
	}
	header, _ := extraOf(req)
	ext := g.viewExtensions(g.snapshot(), viewFrom(header))
	if len(ext) == 0 || *caps == nil {
		return
	}
	c := **caps
	c.Extensions = ext
	*caps = &c
}
