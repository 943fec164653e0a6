package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Request is one call of a tool, as middleware sees it.
type Request struct {
	// Tool is the tool being called.
	Tool *Tool
	// Arguments are the raw arguments, before binding. Middleware may
	// replace them. They may hold sensitive values: log
	// [Request.RedactedArguments] instead.
	Arguments json.RawMessage

	secrets []string // the sensitive values, once bound
}

// CallHandler handles a call. It returns the result, or an error: an
// [*ArgumentError], the tool's own error, or one from middleware.
// [Registry.Call] turns an error into a result with IsError set, unless
// [Registry.PropagateErrors] is set.
type CallHandler func(ctx context.Context, req *Request) (*spec.CallResult, error)

// Handler is the former name of [CallHandler].
//
// Deprecated: use CallHandler. The name read as a kin of server.Handler,
// an http.Handler, which it is not.
type Handler = CallHandler

// Middleware wraps a CallHandler; see [Registry.Use].
type Middleware func(next CallHandler) CallHandler

// Outcome classifies a call for logs and metrics: "ok", "tool_error" (the
// tool returned an error, or a result with IsError set),
// "invalid_arguments", "panic", "denied", "timeout" or "busy".
func Outcome(res *spec.CallResult, err error) string {
	switch {
	case err == nil && (res == nil || !res.IsError):
		return "ok"
	case err == nil:
		return "tool_error"
	case errors.Is(err, ErrInvalidArguments):
		return "invalid_arguments"
	case errors.Is(err, ErrPanic):
		return "panic"
	case errors.Is(err, ErrPermissionDenied):
		return "denied"
	case errors.Is(err, ErrBusy):
		return "busy"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "tool_error"
}

// maxLoggedArguments bounds how much of the arguments a log line holds.
const maxLoggedArguments = 1024

// Logging logs every call at Info level (at Warn for an error outcome):
// the tool, its arguments (cut to 1 KiB), the outcome and the duration. The
// result is logged only at Debug level, since it may be large or sensitive.
// Sensitive values (see the package documentation) are "[redacted]" in
// the arguments, and scrubbed from the error and the result.
// A nil logger means slog.Default().
func Logging(logger *slog.Logger) Middleware {
	return func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			l := logger
			if l == nil {
				l = slog.Default()
			}
			start := time.Now()
			res, err := next(ctx, req)
			outcome := Outcome(res, err)
			level := slog.LevelInfo
			if outcome != "ok" {
				level = slog.LevelWarn
			}
			args := req.RedactedArguments()
			if len(args) > maxLoggedArguments {
				args = args[:maxLoggedArguments] + "…"
			}
			attrs := []slog.Attr{
				slog.String("tool", req.Tool.Name()),
				slog.String("arguments", args),
				slog.String("outcome", outcome),
				slog.Duration("duration", time.Since(start)),
			}
			if err != nil {
				attrs = append(attrs, slog.String("error", req.Redact(err.Error())))
			}
			if res != nil && l.Enabled(ctx, slog.LevelDebug) {
				attrs = append(attrs, slog.String("result", req.Redact(res.Text())))
			}
			l.LogAttrs(ctx, level, "Called tool", attrs...)
			return res, err
		}
	}
}

// Recover turns a panic in the middleware and handlers below it into an
// error matching [ErrPanic], logged with its stack to logger. The registry
// recovers every panic, in tools and middleware alike, whether Recover is
// used or not; Recover is for a chain that should log a panic to a logger
// of its own, or report it to middleware above it (say, metrics) as an
// error rather than a panic. A nil logger means slog.Default().
func Recover(logger *slog.Logger) Middleware {
	return func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *Request) (res *spec.CallResult, err error) {
			defer func() {
				if v := recover(); v != nil {
					l := logger
					if l == nil {
						l = slog.Default()
					}
					res, err = nil, recovered(ctx, l, req.Tool.Name(), v)
				}
			}()
			return next(ctx, req)
		}
	}
}

// CallTimeout bounds every call of every tool by d, on top of a tool's own
// [Timeout] option (the shorter wins). The call's context is cancelled when
// d passes. Zero means no limit. A negative d is a programming error, and
// CallTimeout panics with an error matching [ErrInvalidOption] when it is
// built, as [time.NewTicker] does, rather than failing calls later.
func CallTimeout(d time.Duration) Middleware {
	if d < 0 {
		panic(fmt.Errorf("%w: CallTimeout(%s) is negative", ErrInvalidOption, d))
	}
	return func(next CallHandler) CallHandler {
		if d == 0 {
			return next
		}
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			res, err := next(ctx, req)
			return res, timedOut(ctx, err, req.Tool.Name(), d)
		}
	}
}

// ConcurrencyLimit lets at most n calls of each tool run at once, on top of
// any [MaxConcurrent] option of the tool itself. A call waits for a slot
// until its context ends, and then fails with an error matching [ErrBusy].
// Zero means no limit. A negative n is a programming error, and
// ConcurrencyLimit panics with an error matching [ErrInvalidOption] when it
// is built, rather than failing calls later.
func ConcurrencyLimit(n int) Middleware {
	if n < 0 {
		panic(fmt.Errorf("%w: ConcurrencyLimit(%d) is negative", ErrInvalidOption, n))
	}
	var sems sync.Map // tool name → chan struct{}
	return func(next CallHandler) CallHandler {
		if n == 0 {
			return next
		}
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			s, ok := sems.Load(req.Tool.Name())
			if !ok {
				s, _ = sems.LoadOrStore(req.Tool.Name(), make(chan struct{}, n))
			}
			sem := s.(chan struct{})
			if err := acquire(ctx, sem, req.Tool.Name()); err != nil {
				return nil, err
			}
			defer func() { <-sem }()
			return next(ctx, req)
		}
	}
}

// acquire takes a slot of sem, waiting until ctx ends.
func acquire(ctx context.Context, sem chan struct{}, tool string) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: tool %q is at its limit of %d concurrent calls: %w", ErrBusy, tool, cap(sem), ctx.Err())
	}
}

// recovered logs a recovered panic with its stack and returns the error it
// becomes.
func recovered(ctx context.Context, l *slog.Logger, tool string, v any) error {
	pe := &PanicError{Tool: tool, Value: v, Stack: debug.Stack()}
	l.ErrorContext(ctx, "Recovered a panic", "tool", tool, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
	return pe
}

// deadlineError says which bound a call ran into, for the model; it wraps
// the tool's own error (usually context.DeadlineExceeded).
type deadlineError struct {
	tool string
	d    time.Duration
	err  error
}

func (e *deadlineError) Error() string {
	return fmt.Sprintf("tool %q did not finish within %s: %v", e.tool, e.d, e.err)
}

func (e *deadlineError) Unwrap() error { return e.err }

// timedOut explains err when the call's deadline of d has passed. The
// innermost bound explains it; outer ones leave it alone.
func timedOut(ctx context.Context, err error, tool string, d time.Duration) error {
	var de *deadlineError
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &de) {
		return err
	}
	return &deadlineError{tool: tool, d: d, err: err}
}

// AuthorizeFunc decides whether a call may go ahead; a non-nil error denies
// it. The caller is in ctx (see [CallerFrom]).
type AuthorizeFunc func(ctx context.Context, req *Request) error

// Authorize denies every call for which fn returns an error. The error the
// call fails with matches [ErrPermissionDenied] as well as fn's error.
func Authorize(fn AuthorizeFunc) Middleware {
	return func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			if err := fn(ctx, req); err != nil {
				if !errors.Is(err, ErrPermissionDenied) {
					err = fmt.Errorf("%w: %w", ErrPermissionDenied, err)
				}
				return nil, err
			}
			return next(ctx, req)
		}
	}
}

// RequireScopes denies a call of a tool that declares [Scopes] unless the
// context's [Caller] holds every one of them. Tools without scopes are
// open to every caller.
func RequireScopes() Middleware {
	return Authorize(func(ctx context.Context, req *Request) error {
		need := req.Tool.Scopes()
		if len(need) == 0 {
			return nil
		}
		c, _ := CallerFrom(ctx)
		var missing []string
		for _, s := range need {
			if !c.HasScopes(s) {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		return fmt.Errorf("%w: tool %q requires the scopes %s, and the caller lacks %s",
			ErrPermissionDenied, req.Tool.Name(), strings.Join(need, ", "), strings.Join(missing, ", "))
	})
}
