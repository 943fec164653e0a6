package controllers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// FuzzOfferToTable follows what a hostile Pod may serve past the parser
// (which FuzzParseDocument covers) into what the operator writes: assemble
// for a ToolSet of two replicas, the status entries of the rejected tools,
// and the table. Every tool served must be either offered under a valid,
// unique name or rejected with names and a reason small enough that the
// status still fits in one API request; assembly must be deterministic; and
// the offer must encode into a table that decodes back to it.
func FuzzOfferToTable(f *testing.F) {
	for _, seed := range []string{
		`{"schemaVersion":"toolplane.io/v1alpha1","revision":"sha256:1","server":{"name":"s"},"tools":[{"name":"b","inputSchema":{"type":"object"}},{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"integer","minimum":1}}},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"_meta":{"toolplane.io/version":"1"}}]}`,
		`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"r","inputSchema":{"type":"object","properties":{"x":{"$ref":"http://127.0.0.2/s.json"}}}},{"name":"l","inputSchema":{"type":"object","$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"properties":{"n":{"$ref":"#/$defs/n"}}}}]}`,
		`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"has space","inputSchema":{"type":"object"}},{"name":"dup","inputSchema":{"type":"object"}},{"name":"dup","inputSchema":{"type":"string"}},{"name":"..","inputSchema":{"type":"object"}}]}`,
		`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"p","inputSchema":{"type":"object","properties":{"s":{"type":"string","pattern":"("}}}}]}`,
		`{"schemaVersion":"toolplane.io/v1alpha1","tools":null}`,
		`{"schemaVersion":"toolplane.io/v1alpha2","tools":[]}`,
		`{"schemaVersion":"toolplane.io/v1alpha1","tools":[]} {}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed), "p_")
	}
	// The fault suite's 1 MiB name, which once made the status too large to
	// write: a long name, shorter here so that the fuzzer mutates it fast.
	f.Add([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"`+strings.Repeat("m", 4096)+`","inputSchema":{"type":"object"}}]}`), "")
	f.Fuzz(func(t *testing.T, body []byte, prefix string) {
		doc, err := ParseDocument(body)
		if err != nil {
			return
		}

		ts := &v1alpha1.ToolSet{}
		ts.Namespace, ts.Name = "ns", "ts"
		ts.Spec.Prefix = prefix
		ts.Spec.Limits = v1alpha1.Limits{MaxTools: 256, MaxSchemaBytes: 65536}
		ts.Spec.Service = &v1alpha1.ServiceReference{Name: "svc", Port: 8080}
		a := assemble(ts, []*spec.Document{doc, doc}, 0, "")
		again := assemble(ts, []*spec.Document{doc, doc}, 0, "")
		if ab, bb := mustMarshal(t, a.tools), mustMarshal(t, again.tools); !bytes.Equal(ab, bb) {
			t.Fatal("assemble is not deterministic")
		}

		accounted := map[string]bool{}
		for _, r := range a.rejected {
			if len(r.Reason) > maxReasonLen || len(r.Name) > maxStatusNameLen || len(r.SourceName) > maxStatusNameLen {
				t.Fatalf("rejected tool %.40q has a name of %d bytes, a source name of %d and a reason of %d: the status may not fit in one request",
					r.Name, len(r.Name), len(r.SourceName), len(r.Reason))
			}
			if r.State == v1alpha1.ToolPublished {
				t.Fatalf("rejected tool %q in state Published", r.Name)
			}
			accounted[truncate(r.SourceName, maxStatusNameLen)] = true
		}
		for i, tt := range a.tools {
			if !toolNameRE.MatchString(tt.Name) || tt.Name != prefix+tt.SourceName {
				t.Fatalf("offered %q (source %q) under prefix %q", tt.Name, tt.SourceName, prefix)
			}
			if i > 0 && a.tools[i-1].Name >= tt.Name {
				t.Fatalf("offered tools out of order or repeated: %q then %q", a.tools[i-1].Name, tt.Name)
			}
			if !json.Valid(tt.InputSchema) {
				t.Fatalf("offered %q with an input schema that is not JSON", tt.Name)
			}
			accounted[tt.SourceName] = true
		}
		for _, tool := range doc.Tools {
			if !accounted[truncate(tool.Name, maxStatusNameLen)] {
				t.Fatalf("tool %q is neither offered nor rejected", tool.Name)
			}
		}

		parts, err := spec.EncodeTable(&spec.Table{Tools: a.tools}, "toolplane-tools")
		if err != nil {
			t.Fatalf("encoding the offer: %v", err)
		}
		table, err := spec.DecodeTableParts(parts...)
		if err != nil {
			t.Fatalf("decoding the offer: %v", err)
		}
		if got, want := mustMarshal(t, table.Tools), mustMarshal(t, append(make([]spec.TableTool, 0), a.tools...)); !bytes.Equal(got, want) {
			t.Fatalf("the table changed the offer:\n got %.300s\nwant %.300s", got, want)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
