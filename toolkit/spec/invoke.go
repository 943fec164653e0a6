package spec

import "encoding/json"

// CallResult is the reply of the invoke endpoint, POST /tools/{name}: an MCP
// CallToolResult. MCP's tools/call returns the same value.
type CallResult struct {
	// Content holds the result as text: the string a tool returned, the JSON
	// of a structured result, "Success" for no output, or an error message.
	Content []Content `json:"content"`
	// StructuredContent is the JSON of a structured (non-string) result.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError reports an argument or execution error, described in Content
	// so that a model can correct itself.
	IsError bool `json:"isError"`
}

// Content is one MCP content block. toolkit produces text blocks only.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Text returns the concatenated text of the result's text blocks.
func (r *CallResult) Text() string {
	var s string
	for _, c := range r.Content {
		if c.Type == "text" {
			s += c.Text
		}
	}
	return s
}

// ErrorResponse is the body of every non-200 reply of the invoke endpoint.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes an HTTP-level failure of the invoke endpoint.
type ErrorDetail struct {
	// Code is a stable, machine-readable word such as "tool_not_found",
	// "bad_request", "body_too_large" or "method_not_allowed".
	Code string `json:"code"`
	// Message is meant for people and models.
	Message string `json:"message"`
}
