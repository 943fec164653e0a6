package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// portableName is the function-name rule of OpenAI's and Anthropic's tool
// APIs. Tool names may also hold dots and run to 128 characters.
var portableName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// IsPortableName reports whether name can be given to OpenAI's and
// Anthropic's tool APIs as it is: ^[a-zA-Z0-9_-]{1,64}$.
func IsPortableName(name string) bool { return portableName.MatchString(name) }

// MappedName returns the portable function name for a tool name that is not
// portable: the name with every other character replaced by '_', cut so that
// an '_' and the first 8 hex digits of the name's SHA-256 fit in 64
// characters. A portable name is returned as it is. The digest keeps two names
// that differ only in what was replaced apart; a [Client] maps names back,
// see [Client.ToolName].
func MappedName(name string) string {
	if IsPortableName(name) {
		return name
	}
	return mappedName(name, 8)
}

func mappedName(name string, hexDigits int) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	prefix := b.String()
	if keep := 64 - 1 - hexDigits; len(prefix) > keep {
		prefix = prefix[:keep]
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + "_" + hex.EncodeToString(sum[:])[:hexDigits]
}

// functionNames gives each tool its portable function name, and indexes them.
// Portable names are kept; the others are mapped, with a longer digest in the
// (astronomically unlikely) case that the short one is already taken, so
// that the mapping stays one-to-one for any table.
func functionNames(tools []spec.TableTool) ([]string, map[string]int) {
	names := make([]string, len(tools))
	byFn := make(map[string]int, len(tools))
	for i, t := range tools {
		if IsPortableName(t.Name) {
			names[i] = t.Name
			byFn[t.Name] = i
		}
	}
	for i, t := range tools {
		if names[i] != "" {
			continue
		}
		for _, digits := range []int{8, 16, 32} {
			n := mappedName(t.Name, digits)
			if _, taken := byFn[n]; !taken || digits == 32 {
				names[i] = n
				byFn[n] = i
				break
			}
		}
	}
	return names, byFn
}

// OpenAITool is a function tool in the format of OpenAI's Chat Completions
// API: {"type":"function","function":{…}}.
type OpenAITool struct {
	// Type is always "function".
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction describes a function to an OpenAI model.
type OpenAIFunction struct {
	// Name is the tool's portable function name; see [MappedName].
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is set when Parameters is a strict-mode schema.
	Strict bool `json:"strict,omitempty"`
}

// AnthropicTool is a tool in the format of Anthropic's Messages API.
type AnthropicTool struct {
	// Name is the tool's portable function name; see [MappedName].
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// OpenAITools returns the table's tools as OpenAI function tools, in table
// order. With strict, each tool's schema is converted by [StrictSchema] and
// marked strict; a tool whose schema strict mode cannot express, or whose
// strict schema passes OpenAI's documented limits (OpenAIMaxNesting and
// the others), is offered non-strict instead, as OpenAI allows mixing the
// two. A tool whose input schema is not an object is left out. The result
// is computed once per table; the caller must not modify the schemas.
// [Client.ExportOpenAI] also says which tools were changed or left out,
// and why.
func (c *Client) OpenAITools(strict bool) []OpenAITool {
	s := c.snap()
	s.exportOnce.Do(s.export)
	if strict {
		return slices.Clone(s.strict)
	}
	return slices.Clone(s.openAI)
}

// AnthropicTools returns the table's tools as Anthropic tools, in table
// order. Anthropic takes the input schemas as they are; a tool it would
// refuse is left out (see [Client.ExportAnthropic], which says why). The
// result is computed once per table; the caller must not modify the
// schemas.
func (c *Client) AnthropicTools() []AnthropicTool {
	s := c.snap()
	s.exportOnce.Do(s.export)
	return slices.Clone(s.anthropic)
}

func (s *snapshot) export() {
	n := len(s.table.Tools)
	s.openAI = make([]OpenAITool, 0, n)
	s.strict = make([]OpenAITool, 0, n)
	s.anthropic = make([]AnthropicTool, 0, n)
	for i, t := range s.table.Tools {
		params := t.InputSchema
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if why := anthropicProblem(s.fnName[i], params); why != "" {
			s.notes.anthropic = append(s.notes.anthropic, ExportNote{Tool: t.Name, Omitted: true, Reason: why})
		} else {
			s.anthropic = append(s.anthropic, AnthropicTool{Name: s.fnName[i], Description: desc, InputSchema: params})
		}
		if why := objectRoot(params); why != "" {
			note := ExportNote{Tool: t.Name, Omitted: true, Reason: why}
			s.notes.openAI = append(s.notes.openAI, note)
			s.notes.strict = append(s.notes.strict, note)
			continue
		}
		fn := OpenAIFunction{Name: s.fnName[i], Description: desc, Parameters: params}
		s.openAI = append(s.openAI, OpenAITool{Type: "function", Function: fn})
		strict, err := StrictSchema(params)
		if err == nil {
			if why := strictLimits(strict); why != "" {
				err = fmt.Errorf("%w: %s", ErrNotStrict, why)
			}
		}
		if err == nil {
			fn.Parameters, fn.Strict = strict, true
		} else {
			s.notes.strict = append(s.notes.strict, ExportNote{Tool: t.Name, Reason: "offered non-strict: " + err.Error()})
		}
		s.strict = append(s.strict, OpenAITool{Type: "function", Function: fn})
	}
}
