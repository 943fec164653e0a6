package search

import (
	"encoding/json"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// The fields of a tool that BM25F ranks, each with its own weight and
// length normalization.
const (
	fieldName      = iota // the published name, split into words
	fieldTitle            // title, or annotations.title
	fieldDesc             // description
	fieldParamName        // property names of the input schema, nested ones too
	fieldParamDesc        // their descriptions, titles and string enum values
	fieldTags             // annotations as words, _meta category, the ToolSet's name
	numFields
)

// CategoryMeta is the _meta key whose string value is a tool's category,
// matched by [Filter].Category and ranked with its other words.
const CategoryMeta = "toolplane.io/category"

// Bounds on what one tool's schema contributes, so that a huge or deeply
// nested schema costs the index no more than a large ordinary one.
const (
	maxSchemaDepth = 4
	maxSchemaProps = 256
	maxFieldBytes  = 16 << 10
)

// schemaNode is what the index reads of a JSON Schema: property names and
// the words describing them. Items and the combinators are kept raw and
// decoded only when walked, since they may be arrays or booleans.
type schemaNode struct {
	Title       string                     `json:"title"`
	Description string                     `json:"description"`
	Enum        []any                      `json:"enum"`
	Properties  map[string]json.RawMessage `json:"properties"`
	Items       json.RawMessage            `json:"items"`
	AnyOf       []json.RawMessage          `json:"anyOf"`
	OneOf       []json.RawMessage          `json:"oneOf"`
	AllOf       []json.RawMessage          `json:"allOf"`
}

// toolText is the text of each field of one tool.
type toolText [numFields]string

// textOf gathers the text of t's fields.
func textOf(t *spec.TableTool) toolText {
	var out toolText
	out[fieldName] = t.Name
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	out[fieldTitle] = clip(title)
	out[fieldDesc] = clip(t.Description)

	var names, descs strings.Builder
	props := 0
	var walk func(raw json.RawMessage, depth int)
	walk = func(raw json.RawMessage, depth int) {
		if depth > maxSchemaDepth || len(raw) == 0 || raw[0] != '{' {
			return
		}
		var n schemaNode
		if json.Unmarshal(raw, &n) != nil {
			return
		}
		if depth > 0 {
			addText(&descs, n.Title)
			addText(&descs, n.Description)
			for _, e := range n.Enum {
				if s, ok := e.(string); ok {
					addText(&descs, s)
				}
			}
		}
		for name, sub := range n.Properties {
			if props >= maxSchemaProps {
				return
			}
			props++
			addText(&names, name)
			walk(sub, depth+1)
		}
		walk(n.Items, depth+1)
		for _, l := range [][]json.RawMessage{n.AnyOf, n.OneOf, n.AllOf} {
			for _, sub := range l {
				walk(sub, depth+1)
			}
		}
	}
	walk(t.InputSchema, 0)
	out[fieldParamName] = clip(names.String())
	out[fieldParamDesc] = clip(descs.String())

	var tags strings.Builder
	if a := t.Annotations; a != nil {
		if a.ReadOnlyHint != nil && *a.ReadOnlyHint {
			addText(&tags, "read only")
		}
		if a.DestructiveHint != nil && *a.DestructiveHint {
			addText(&tags, "destructive")
		}
		if a.IdempotentHint != nil && *a.IdempotentHint {
			addText(&tags, "idempotent")
		}
	}
	addText(&tags, category(t))
	addText(&tags, t.ToolSet.Name)
	out[fieldTags] = clip(tags.String())
	return out
}

func addText(b *strings.Builder, s string) {
	if s == "" || b.Len() >= maxFieldBytes {
		return
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(s)
}

// clip bounds one field's text; words cut in half at the end do no harm.
func clip(s string) string {
	if len(s) > maxFieldBytes {
		return s[:maxFieldBytes]
	}
	return s
}

// category returns the tool's _meta category, or "".
func category(t *spec.TableTool) string {
	if s, ok := t.Meta[CategoryMeta].(string); ok {
		return s
	}
	return ""
}
