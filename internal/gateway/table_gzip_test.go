package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// oneNamespace may call the tools of namespace a only.
type oneNamespace struct{}

func (oneNamespace) Authenticate(context.Context, string) (*Caller, error) {
	return &Caller{User: "u"}, nil
}

func (oneNamespace) Allowed(_ context.Context, _ *Caller, namespace, _ string) (bool, error) {
	return namespace == "a", nil
}

// While maxFilteredGzips parts of the table are being compressed, another
// caller who asks for gzip gets its part plain, not one more compression.
func TestFilteredTableIsPlainWhileTheGzipSlotsAreTaken(t *testing.T) {
	g := New(&Options{Auth: oneNamespace{}})
	var tools []spec.TableTool
	for i, ns := range []string{"a", "a", "b"} {
		name := fmt.Sprintf("t%d", i)
		tools = append(tools, spec.TableTool{Name: name, SourceName: name, InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:   spec.ObjectReference{Namespace: ns, Name: "s"},
			Endpoints: &spec.Endpoints{Invoke: "http://s." + ns + ".svc:8080/tools/" + name, MCP: "http://s." + ns + ".svc:8080/mcp"}})
	}
	if err := g.SetTable(&spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}); err != nil {
		t.Fatal(err)
	}
	get := func() string {
		req := httptest.NewRequest(http.MethodGet, TablePath, nil)
		req.Header.Set("Authorization", "Bearer x")
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return rec.Header().Get("Content-Encoding")
	}
	if enc := get(); enc != "gzip" {
		t.Fatalf("with free slots: Content-Encoding %q, want gzip", enc)
	}
	for range maxFilteredGzips {
		filteredGzips <- struct{}{}
	}
	defer func() {
		for range maxFilteredGzips {
			<-filteredGzips
		}
	}()
	if enc := get(); enc != "" {
		t.Errorf("with every slot taken: Content-Encoding %q, want none", enc)
	}
}
