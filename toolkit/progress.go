package toolkit

import (
	"context"
	"log/slog"
)

// Reporter receives what a tool reports while it runs: progress and log
// messages for the client that called it. A transport puts one in the
// call's context with [WithReporter]; the MCP transport of toolkit/server
// turns them into notifications/progress (when the client sent a
// progressToken) and notifications/message (at or above the level the
// client set). Without a Reporter, [Progress] and [Log] do nothing, at the
// cost of a context lookup.
type Reporter interface {
	// Progress reports done out of total (total <= 0: unknown), with an
	// optional message.
	Progress(ctx context.Context, done, total float64, message string)
	// Log reports a message at a level.
	Log(ctx context.Context, level slog.Level, message string)
}

type reporterKey struct{}

// redactingReporter scrubs the sensitive values of a call from what its
// tool reports.
type redactingReporter struct {
	next Reporter
	req  *Request
}

func (r redactingReporter) Progress(ctx context.Context, done, total float64, message string) {
	r.next.Progress(ctx, done, total, r.req.Redact(message))
}

func (r redactingReporter) Log(ctx context.Context, level slog.Level, message string) {
	r.next.Log(ctx, level, r.req.Redact(message))
}

// WithReporter returns ctx carrying r, for the tool a transport calls.
func WithReporter(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, r)
}

// Progress reports a running tool's progress to its caller: done out of
// total (total <= 0 when it is not known), with an optional message. Over
// MCP it becomes notifications/progress when the client asked for progress
// with a progressToken; MCP wants done to grow with every report, so a
// report that does not is dropped. Elsewhere it does nothing.
func Progress(ctx context.Context, done, total float64, message string) {
	if r, ok := ctx.Value(reporterKey{}).(Reporter); ok {
		r.Progress(ctx, done, total, message)
	}
}

// Log sends a log message to a running tool's caller. Over MCP it becomes
// notifications/message when the client set a logging level at or below
// level. Elsewhere it does nothing: log to a [slog.Logger] for the
// service's own logs.
func Log(ctx context.Context, level slog.Level, message string) {
	if r, ok := ctx.Value(reporterKey{}).(Reporter); ok {
		r.Log(ctx, level, message)
	}
}
