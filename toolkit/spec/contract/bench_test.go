package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

// BenchmarkSchemaDigest is what the operator adds per tool when it builds
// table entries; BenchmarkMarshalTool, the baseline, is the json.Marshal of
// the tool it already does per tool and Pod to group replicas' forms.
func BenchmarkSchemaDigest(b *testing.B) {
	tools := tabletest.Tools(100)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := &tools[i%len(tools)]
		_ = spec.SchemaDigest(t.InputSchema, t.OutputSchema, t.Annotations, t.Execution)
	}
}

func BenchmarkMarshalTool(b *testing.B) {
	tools := tabletest.Tools(100)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := &tools[i%len(tools)]
		st := spec.Tool{Name: t.SourceName, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Meta: t.Meta}
		if _, err := json.Marshal(st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompare classifies a change to a realistic tool: what the
// operator pays per changed tool, only when its digest changed.
func BenchmarkCompare(b *testing.B) {
	tools := tabletest.Tools(100)
	olds := make([]contract.Version, len(tools))
	news := make([]contract.Version, len(tools))
	for i, t := range tools {
		olds[i] = contract.FromTableTool(t)
		news[i] = olds[i]
		news[i].InputSchema = edit(b, t.InputSchema, func(root map[string]any) {
			root["required"] = append([]any{"zz_added"}, anySlice(root["required"])...)
			root["properties"].(map[string]any)["zz_added"] = map[string]any{"type": "integer"}
		})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if len(contract.Compare(olds[i%len(olds)], news[i%len(news)])) == 0 {
			b.Fatal("no change found")
		}
	}
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}
