package toolkit

import (
	"fmt"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Option configures a tool when it is declared.
type Option func(*toolConfig)

type toolConfig struct {
	title         string
	annotations   spec.Annotations
	hasAnnotation bool
	meta          map[string]any
	scopes        []string
	timeout       time.Duration
	maxConcurrent int
	execution     *spec.Execution
	err           error // the first option out of range
}

func (c *toolConfig) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
	}
}

func (c *toolConfig) setMeta(key string, v any) {
	if c.meta == nil {
		c.meta = map[string]any{}
	}
	c.meta[key] = v
}

func boolPtr(b bool) *bool { return &b }

// Title sets a human-readable title, served as the tool's title and as the
// title annotation.
func Title(title string) Option {
	return func(c *toolConfig) { c.title = title }
}

// ReadOnly marks the tool as not modifying its environment (MCP's
// readOnlyHint).
func ReadOnly() Option {
	return func(c *toolConfig) { c.annotations.ReadOnlyHint = boolPtr(true); c.hasAnnotation = true }
}

// Idempotent marks repeated calls with the same arguments as having no
// further effect (MCP's idempotentHint).
func Idempotent() Option {
	return func(c *toolConfig) { c.annotations.IdempotentHint = boolPtr(true); c.hasAnnotation = true }
}

// Destructive sets MCP's destructiveHint. MCP assumes true when it is not
// given, so the useful call is usually Destructive(false).
func Destructive(destructive bool) Option {
	return func(c *toolConfig) { c.annotations.DestructiveHint = boolPtr(destructive); c.hasAnnotation = true }
}

// OpenWorld sets MCP's openWorldHint: whether the tool reaches entities
// outside a closed domain, such as the web. MCP assumes true when it is not
// given.
func OpenWorld(openWorld bool) Option {
	return func(c *toolConfig) { c.annotations.OpenWorldHint = boolPtr(openWorld); c.hasAnnotation = true }
}

// Version sets the tool's version, served in _meta as [spec.MetaVersion].
func Version(v string) Option {
	return func(c *toolConfig) { c.setMeta(spec.MetaVersion, v) }
}

// Category sets the tool's category, served in _meta as [spec.MetaCategory].
func Category(category string) Option {
	return func(c *toolConfig) { c.setMeta(spec.MetaCategory, category) }
}

// Tags sets the tool's tags, served in _meta as [spec.MetaTags].
func Tags(tags ...string) Option {
	return func(c *toolConfig) { c.setMeta(spec.MetaTags, append([]string(nil), tags...)) }
}

// Asks declares that the tool asks its user with [Ask], served in _meta as
// [spec.MetaAsks]: the toolplane gateway calls such a tool over MCP for a
// client that can answer, and others at their invoke endpoint, which is
// cheaper and where Ask returns [ErrCannotAsk].
func Asks() Option {
	return func(c *toolConfig) { c.setMeta(spec.MetaAsks, true) }
}

// Meta sets a key of the tool's _meta object. MCP reserves keys whose
// prefix's second label is "modelcontextprotocol" or "mcp".
func Meta(key string, value any) Option {
	return func(c *toolConfig) { c.setMeta(key, value) }
}

// Scopes declares the scopes a caller must hold to call the tool. They are
// served in _meta as [spec.MetaScopes] and enforced by [RequireScopes].
func Scopes(scopes ...string) Option {
	return func(c *toolConfig) {
		c.scopes = append([]string(nil), scopes...)
		c.setMeta(spec.MetaScopes, c.scopes)
	}
}

// Timeout bounds each call of the tool. The tool's context is cancelled
// when it passes; a tool that ignores its context is not abandoned. Zero
// means no limit; a negative d makes declaring the tool fail with an error
// matching [ErrInvalidOption].
func Timeout(d time.Duration) Option {
	return func(c *toolConfig) {
		if d < 0 {
			c.fail("Timeout(%s) is negative", d)
		}
		c.timeout = d
	}
}

// MaxConcurrent bounds how many calls of the tool run at once. Further calls
// wait for a slot until their context ends. Zero means no limit; a negative
// n makes declaring the tool fail with an error matching [ErrInvalidOption].
func MaxConcurrent(n int) Option {
	return func(c *toolConfig) {
		if n < 0 {
			c.fail("MaxConcurrent(%d) is negative", n)
		}
		c.maxConcurrent = n
	}
}

// TaskSupport says whether a caller may call the tool as an MCP task
// (2025-11-25): [spec.TaskSupportOptional] lets it, [spec.TaskSupportRequired]
// makes it, [spec.TaskSupportForbidden] (the default) refuses it. The tool
// is served with MCP's execution.taskSupport in tools/list and the spec
// document. Called as a task, its ordinary handler runs in the background
// of the server's task store: [Progress] messages become the task's status
// message, and tasks/cancel cancels its context. Over the invoke endpoint
// it is an ordinary call whatever the value. Any other value makes
// declaring the tool fail with an error matching [ErrInvalidOption].
func TaskSupport(support string) Option {
	return func(c *toolConfig) {
		e := &spec.Execution{TaskSupport: support}
		if err := e.Validate(); err != nil {
			c.fail("TaskSupport(%q): %v", support, err)
			return
		}
		if support == "" || support == spec.TaskSupportForbidden {
			c.execution = nil
			return
		}
		c.execution = e
	}
}
