package controllers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestListMCPRecordsTheServersExtensions: the scrape of an MCP server
// keeps the names of the extensions its capabilities advertise, sorted,
// and of a hostile server's list only spec.MaxExtensions valid names of
// at most spec.MaxExtensionName bytes; no settings.
func TestListMCPRecordsTheServersExtensions(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  map[string]any
		want []string
	}{
		{"none", nil, nil},
		{"two", map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []any{"text/html"}}, "com.example/annotate": map[string]any{}},
			[]string{"com.example/annotate", "io.modelcontextprotocol/ui"}},
		{"hostile", func() map[string]any {
			m := map[string]any{"no-slash": map[string]any{}, "a/b/c": map[string]any{}, "sp ace/x": map[string]any{}, "/x": map[string]any{},
				"com.example/" + string(make([]byte, spec.MaxExtensionName)): map[string]any{}}
			for i := range 100 {
				m[fmt.Sprintf("com.example/e%03d", i)] = map[string]any{"big": string(make([]byte, 1<<10))}
			}
			return m
		}(), func() []string {
			var w []string
			for i := range spec.MaxExtensions {
				w = append(w, fmt.Sprintf("com.example/e%03d", i))
			}
			return w
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Extensions: tc.ext}
			s := mcp.NewServer(&mcp.Implementation{Name: "ext"}, &mcp.ServerOptions{Capabilities: caps})
			s.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
			t.Cleanup(srv.Close)
			doc, err := listMCPOnce(newScraper(1, 0), mcpTarget(0, 10*time.Second), srv.URL+"/mcp", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(doc.Extensions, tc.want) {
				t.Errorf("extensions %q, want %q", doc.Extensions, tc.want)
			}
			// The same again is the document held, as for its tools.
			again, err := listMCPOnce(newScraper(1, 0), mcpTarget(0, 10*time.Second), srv.URL+"/mcp", doc)
			if err != nil || again != doc {
				t.Errorf("a scrape that found nothing new: %v, same %v", err, again == doc)
			}
		})
	}
}

// TestTableEntriesCarryTheExtensionsEveryPodAdvertises: an MCP ToolSet's
// entries carry the extensions that every document names, checked again
// (a document is the workload's word); a toolkit ToolSet's carry none.
func TestTableEntriesCarryTheExtensionsEveryPodAdvertises(t *testing.T) {
	tool := spec.Tool{Name: "t", InputSchema: []byte(`{"type":"object"}`)}
	doc := func(ext ...string) *spec.Document {
		d := &spec.Document{SchemaVersion: spec.SchemaVersion, Tools: []spec.Tool{tool}, Extensions: ext}
		d.Revision = spec.Revision(d.Tools)
		return d
	}
	ts := func(protocol v1alpha1.Protocol) *v1alpha1.ToolSet {
		return &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "crm"}, Spec: v1alpha1.ToolSetSpec{Protocol: protocol}}
	}
	for _, tc := range []struct {
		name     string
		protocol v1alpha1.Protocol
		docs     []*spec.Document
		want     []string
	}{
		{"one pod", v1alpha1.ProtocolMCP, []*spec.Document{doc("com.example/b", "com.example/a")}, []string{"com.example/a", "com.example/b"}},
		{"every pod", v1alpha1.ProtocolMCP, []*spec.Document{doc("com.example/a", "com.example/b"), doc("com.example/b")}, []string{"com.example/b"}},
		{"invalid and repeated", v1alpha1.ProtocolMCP, []*spec.Document{doc("bad", "com.example/a", "com.example/a")}, []string{"com.example/a"}},
		{"toolkit", "", []*spec.Document{doc("com.example/a")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := assembleWithin(ts(tc.protocol), tc.docs, 0, toolBounds{}, "")
			if len(a.tools) != 1 {
				t.Fatalf("tools %+v rejected %+v", a.tools, a.rejected)
			}
			if !slices.Equal(a.tools[0].Extensions, tc.want) {
				t.Errorf("extensions %q, want %q", a.tools[0].Extensions, tc.want)
			}
		})
	}
}
