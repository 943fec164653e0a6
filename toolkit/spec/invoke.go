package spec

import (
	"encoding/json"
	"slices"
)

// CallResult is the reply of the invoke endpoint, POST /tools/{name}: an MCP
// CallToolResult. MCP's tools/call returns the same value.
type CallResult struct {
	// Content holds the result: as text, the string a tool returned, the
	// JSON of a structured result, "Success" for no output, or an error
	// message; or the blocks a tool built itself, of any type.
	Content []Content `json:"content"`
	// StructuredContent is the JSON of a structured (non-string) result.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError reports an argument or execution error, described in Content
	// so that a model can correct itself.
	IsError bool `json:"isError"`
	// Meta is the result's _meta, as an MCP server other than toolkit may
	// give it.
	Meta map[string]any `json:"_meta,omitempty"`
}

// Content types of MCP's content blocks.
const (
	ContentText     = "text"
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// Content is one MCP content block: text, an image, audio, or an embedded
// resource. Type says which fields are set.
type Content struct {
	// Type is one of ContentText, ContentImage, ContentAudio and
	// ContentResource.
	Type string `json:"type"`
	// Text is a text block's text.
	Text string `json:"text,omitempty"`
	// Data is an image's or audio's bytes, base64 in JSON.
	Data []byte `json:"data,omitempty"`
	// MIMEType is an image's or audio's media type, such as image/png.
	MIMEType string `json:"mimeType,omitempty"`
	// Resource is an embedded resource's contents.
	Resource *ResourceContents `json:"resource,omitempty"`
	// Extra holds the fields of a block that Content does not name, as
	// received: annotations, _meta, a resource_link's uri and name, or the
	// fields of a content type MCP adds later. An MCP server other than
	// toolkit may send any of them, and they pass through a decode and an
	// encode unchanged. Encoding never lets Extra override a named field.
	Extra map[string]json.RawMessage `json:"-"`
}

// contentFields are the JSON names of Content's named fields.
var contentFields = []string{"type", "text", "data", "mimeType", "resource"}

// UnmarshalJSON decodes a content block, keeping the fields Content does
// not name in Extra.
func (c *Content) UnmarshalJSON(b []byte) error {
	type plain Content
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range contentFields {
		delete(all, k)
	}
	if len(all) == 0 {
		all = nil
	}
	*c = Content(p)
	c.Extra = all
	return nil
}

// ResourceContents are the contents of an embedded resource: text or
// bytes, with the resource's URI.
type ResourceContents struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     []byte `json:"blob,omitempty"`
	// Meta is the resource's _meta, as an MCP server may give it.
	Meta map[string]any `json:"_meta,omitempty"`
}

// MarshalJSON writes the fields MCP requires of each type even when they
// are empty (a text block's text, an image's data and mimeType), and no
// others.
func (c Content) MarshalJSON() ([]byte, error) {
	b, err := c.marshalNamed()
	if err != nil || len(c.Extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range c.Extra {
		if _, named := all[k]; !named && !slices.Contains(contentFields, k) {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

func (c Content) marshalNamed() ([]byte, error) {
	switch c.Type {
	case ContentText:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	case ContentImage, ContentAudio:
		data := c.Data
		if data == nil {
			data = []byte{}
		}
		return json.Marshal(struct {
			Type     string `json:"type"`
			Data     []byte `json:"data"`
			MIMEType string `json:"mimeType"`
		}{c.Type, data, c.MIMEType})
	}
	type plain Content
	return json.Marshal(plain(c))
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
