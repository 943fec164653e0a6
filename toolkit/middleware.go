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
	// replace them.
	Arguments json.RawMessage
}

// Handler handles a call. It returns the result, or an error: an
// [*ArgumentError], the tool's own error, or one from middleware.
// [Registry.Call] turns an error into a result with IsError set, unless
// [Registry.PropagateErrors] is set.
type Handler func(ctx context.Context, req *Request) (*spec.CallResult, error)

// Middleware wraps a Handler; see [Registry.Use].
type Middleware func(next Handler) Handler

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
// A nil logger means slog.Default().
func Logging(logger *slog.Logger) Middleware {
	return func(next Handler) Handler {
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
			args := string(req.Arguments)
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
				attrs = append(attrs, slog.String("error", err.Error()))
			}
			if res != nil && l.Enabled(ctx, slog.LevelDebug) {
				attrs = append(attrs, slog.String("result", res.Text()))
			}
			l.LogAttrs(ctx, level, "Called tool", attrs...)
			return res, err
		}
	}
}

// Recover turns a panic in the middleware and handlers below it into an
// error matching [ErrPanic], logged with its stack. Tools themselves are
// always recovered by the registry; Recover guards middleware. A nil logger
// means slog.Default().
func Recover(logger *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, req *Request) (res *spec.CallResult, err error) {
			defer func() {
				if v := recover(); v != nil {
					l := logger
					if l == nil {
						l = slog.Default()
					}
					pe := &PanicError{Tool: req.Tool.Name(), Value: v, Stack: debug.Stack()}
					l.ErrorContext(ctx, "Recovered a panic", "tool", pe.Tool, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
					res, err = nil, pe
				}
			}()
			return next(ctx, req)
		}
	}
}

// CallTimeout bounds every call of every tool by d, on top of a tool's own
// [Timeout] option (the shorter wins). The call's context is cancelled when
// d passes.
func CallTimeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			res, err := next(ctx, req)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !strings.Contains(err.Error(), "did not finish") {
				err = fmt.Errorf("tool %q did not finish within %s: %w", req.Tool.Name(), d, err)
			}
			return res, err
		}
	}
}

// ConcurrencyLimit lets at most n calls of each tool run at once, on top of
// any [MaxConcurrent] option of the tool itself. A call waits for a slot
// until its context ends, and then fails with an error matching [ErrBusy].
func ConcurrencyLimit(n int) Middleware {
	var sems sync.Map // tool name → chan struct{}
	return func(next Handler) Handler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			s, ok := sems.Load(req.Tool.Name())
			if !ok {
				s, _ = sems.LoadOrStore(req.Tool.Name(), make(chan struct{}, n))
			}
			sem := s.(chan struct{})
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: tool %q is at its limit of %d concurrent calls: %w", ErrBusy, req.Tool.Name(), n, ctx.Err())
			}
			return next(ctx, req)
		}
	}
}

// AuthorizeFunc decides whether a call may go ahead; a non-nil error denies
// it. The caller is in ctx (see [CallerFrom]).
type AuthorizeFunc func(ctx context.Context, req *Request) error

// Authorize denies every call for which fn returns an error. The error the
// call fails with matches [ErrPermissionDenied] as well as fn's error.
func Authorize(fn AuthorizeFunc) Middleware {
	return func(next Handler) Handler {
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
