// Package tabletest generates realistic tool tables for tests and benchmarks:
// varied names, prose descriptions and schemas with nested objects, arrays,
// enums, formats and bounds, as the toolkit's schema generator emits them.
// The same n always gives the same tools.
package tabletest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

var (
	verbs   = []string{"get", "list", "query", "create", "update", "delete", "search", "count", "export", "sync", "validate", "archive"}
	nouns   = []string{"customer", "order", "invoice", "ticket", "shipment", "product", "account", "payment", "refund", "user", "report", "forecast", "contract", "lead", "asset"}
	domains = []string{"crm", "billing", "support", "logistics", "catalog", "identity", "analytics", "finance", "sales", "inventory"}
	words   = strings.Fields(`the a of to and for with from by in on at when unless which returns matching
		records customer order invoice identifier status region currency amount date range page limit
		cursor filter sort field value active archived pending failed completed optional required default
		maximum minimum results includes excludes timezone locale email phone address country postal code
		tier plan seats usage quota window interval owner team priority severity label tag note comment`)
	formats = []string{"date-time", "email", "uri", "uuid", "date"}
)

// Tools returns n tools with unique names, sorted by name.
func Tools(n int) []spec.TableTool {
	r := rand.New(rand.NewPCG(uint64(n), 0x7001))
	tools := make([]spec.TableTool, n)
	for i := range tools {
		d := domains[r.IntN(len(domains))]
		source := fmt.Sprintf("%s_%s_%d", verbs[r.IntN(len(verbs))], nouns[r.IntN(len(nouns))], i)
		ns, set := d, d+"-tools"
		svc := fmt.Sprintf("http://%s.%s.svc:8080", set, ns)
		t := spec.TableTool{
			Name:        d + "_" + source,
			SourceName:  source,
			Title:       title(source),
			Description: sentence(r, 12+r.IntN(30)),
			InputSchema: mustJSON(object(r, 3+r.IntN(6), 2)),
			ToolSet:     spec.ObjectReference{Namespace: ns, Name: set},
			Endpoints:   &spec.Endpoints{Invoke: svc + spec.InvokePrefix + source, MCP: svc + spec.MCPPath},
			Meta:        map[string]any{spec.MetaVersion: fmt.Sprintf("1.%d.%d", r.IntN(10), r.IntN(20)), spec.MetaCategory: d},
		}
		if r.IntN(2) == 0 {
			t.OutputSchema = mustJSON(object(r, 2+r.IntN(4), 1))
		}
		if r.IntN(3) == 0 {
			yes := true
			t.Annotations = &spec.Annotations{ReadOnlyHint: &yes}
		}
		tools[i] = t
	}
	spec.SortTableTools(tools)
	return tools
}

// Table returns a table of n tools with its revision set.
func Table(n int) *spec.Table {
	tools := Tools(n)
	return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}
}

func object(r *rand.Rand, nprops, depth int) map[string]any {
	props := map[string]any{}
	var required []string
	for j := range nprops {
		name := fmt.Sprintf("%s_%s", words[r.IntN(len(words))], nouns[r.IntN(len(nouns))])
		if _, dup := props[name]; dup {
			name = fmt.Sprintf("%s%d", name, j)
		}
		props[name] = property(r, depth)
		if r.IntN(2) == 0 {
			required = append(required, name)
		}
	}
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func property(r *rand.Rand, depth int) map[string]any {
	p := map[string]any{"description": sentence(r, 4+r.IntN(12))}
	switch k := r.IntN(7); {
	case k == 0:
		p["type"] = "integer"
		p["minimum"] = 0
		p["maximum"] = 1 + r.IntN(10000)
	case k == 1:
		p["type"] = "string"
		p["enum"] = []string{"pending", "active", "archived", "failed"}[:2+r.IntN(3)]
	case k == 2:
		p["type"] = "string"
		p["format"] = formats[r.IntN(len(formats))]
	case k == 3:
		p["type"] = "array"
		p["items"] = map[string]any{"type": "string", "maxLength": 64}
		p["maxItems"] = 100
	case k == 4 && depth > 0:
		o := object(r, 2+r.IntN(3), depth-1)
		o["description"] = p["description"]
		return o
	case k == 5:
		p["type"] = "boolean"
		p["default"] = false
	default:
		p["type"] = "string"
		p["maxLength"] = 256
		p["pattern"] = "^[A-Za-z0-9_-]+$"
	}
	return p
}

func sentence(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = words[r.IntN(len(words))]
	}
	s := strings.Join(w, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func title(source string) string {
	parts := strings.Split(source, "_")
	parts[0] = strings.ToUpper(parts[0][:1]) + parts[0][1:]
	return strings.Join(parts[:len(parts)-1], " ")
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
