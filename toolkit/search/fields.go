package search

import (
	"encoding/json"
	"slices"
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
	fieldTags             // annotations as words, _meta category
	fieldOwner            // the owner ToolSet's name and namespace: the product, usually
	fieldExact            // name and description, words as they are: not stemmed
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
// the words describing them. Properties decode in the same pass as their
// parent; items and the combinators are kept raw and decoded only when
// walked, since they may be arrays or booleans.
type schemaNode struct {
	Title       string                 `json:"title"`
	Description string                 `json:"description"`
	Enum        []json.RawMessage      `json:"enum"`
	Properties  map[string]*schemaNode `json:"properties"`
	Items       json.RawMessage        `json:"items"`
	AnyOf       []json.RawMessage      `json:"anyOf"`
	OneOf       []json.RawMessage      `json:"oneOf"`
	AllOf       []json.RawMessage      `json:"allOf"`
}

// rawNode is a schema node whose properties stay raw: the slower walk, for
// a schema that does not decode as schemaNode (a property that is a
// boolean schema, a title that is not a string).
type rawNode struct {
	Title       json.RawMessage            `json:"title"`
	Description json.RawMessage            `json:"description"`
	Enum        json.RawMessage            `json:"enum"`
	Properties  map[string]json.RawMessage `json:"properties"`
	Items       json.RawMessage            `json:"items"`
	AnyOf       []json.RawMessage          `json:"anyOf"`
	OneOf       []json.RawMessage          `json:"oneOf"`
	AllOf       []json.RawMessage          `json:"allOf"`
}

// decodeNode decodes raw as a schema node in one pass if it can, and
// property by property if not.
func decodeNode(raw json.RawMessage) *schemaNode {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var n schemaNode
	if json.Unmarshal(raw, &n) == nil {
		return &n
	}
	var r rawNode
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	n = schemaNode{Items: r.Items, AnyOf: r.AnyOf, OneOf: r.OneOf, AllOf: r.AllOf}
	_ = json.Unmarshal(r.Title, &n.Title)
	_ = json.Unmarshal(r.Description, &n.Description)
	_ = json.Unmarshal(r.Enum, &n.Enum)
	if len(r.Properties) > 0 {
		n.Properties = make(map[string]*schemaNode, len(r.Properties))
		for k, v := range r.Properties {
			n.Properties[k] = decodeNode(v)
		}
	}
	return &n
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
	var walkNode func(n *schemaNode, depth int)
	walkRaw := func(raw json.RawMessage, depth int) {
		if depth <= maxSchemaDepth {
			walkNode(decodeNode(raw), depth)
		}
	}
	walkNode = func(n *schemaNode, depth int) {
		if n == nil || depth > maxSchemaDepth {
			return
		}
		if depth > 0 {
			addText(&descs, n.Title)
			addText(&descs, n.Description)
			for _, e := range n.Enum {
				var s string
				if len(e) > 0 && e[0] == '"' && json.Unmarshal(e, &s) == nil {
					addText(&descs, s)
				}
			}
		}
		// Property names in order, so that the text is the same on every
		// build (bounded by maxSchemaProps).
		keys := make([]string, 0, len(n.Properties))
		for name := range n.Properties {
			keys = append(keys, name)
		}
		slices.Sort(keys)
		for _, name := range keys {
			if props >= maxSchemaProps {
				return
			}
			props++
			addText(&names, name)
			walkNode(n.Properties[name], depth+1)
		}
		walkRaw(n.Items, depth+1)
		for _, l := range [][]json.RawMessage{n.AnyOf, n.OneOf, n.AllOf} {
			for _, sub := range l {
				walkRaw(sub, depth+1)
			}
		}
	}
	walkRaw(t.InputSchema, 0)
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
	out[fieldTags] = clip(tags.String())
	var owner strings.Builder
	words(t.ToolSet.Name+" "+t.ToolSet.Namespace, func(w string) {
		if lw := strings.ToLower(w); !genericOwnerWords[lw] && strings.Trim(lw, "0123456789") != "" {
			addText(&owner, lw)
		}
	})
	out[fieldOwner] = owner.String()
	out[fieldExact] = clip(t.Name + " " + t.Description)
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

// genericOwnerWords name no product: words of ToolSet names and namespaces
// that say nothing about what the tools do.
var genericOwnerWords = map[string]bool{
	"mcp": true, "server": true, "servers": true, "tool": true, "tools": true, "toolset": true,
	"team": true, "system": true, "default": true, "prod": true, "production": true, "staging": true, "dev": true,
}

// ownerTerm marks a term of fieldOwner, so that a query's product word
// scores apart from the same word in other fields.
func ownerTerm(t string) string { return "\x00" + t }

// exactTerm marks a term of fieldExact, a word as written, lowercased.
func exactTerm(t string) string { return "\x01" + t }
