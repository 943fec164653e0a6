package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestMiddlewareOrder(t *testing.T) {
	var trace []string
	mark := func(name string) Middleware {
		return func(next CallHandler) CallHandler {
			return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
				trace = append(trace, name+">")
				res, err := next(ctx, req)
				trace = append(trace, "<"+name)
				return res, err
			}
		}
	}
	var r Registry
	_ = r.Add(greeter(t, "g"))
	r.Use(mark("a"), mark("b"))
	r.Use(mark("c"))
	if _, err := r.Call(context.Background(), "g", json.RawMessage(`{"name":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(trace, " "); got != "a> b> c> <c <b <a" {
		t.Errorf("order = %s", got)
	}
}

func TestMiddlewareMayRewriteArguments(t *testing.T) {
	var r Registry
	_ = r.Add(greeter(t, "g"))
	r.Use(func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) {
			req.Arguments = json.RawMessage(`{"name":"rewritten"}`)
			return next(ctx, req)
		}
	})
	res, _ := r.Call(context.Background(), "g", json.RawMessage(`{"name":"x"}`))
	if res.Text() != "Hello, rewritten" {
		t.Errorf("text = %q", res.Text())
	}
}

func TestCaller(t *testing.T) {
	if _, ok := CallerFrom(context.Background()); ok {
		t.Error("empty context has a caller")
	}
	ctx := WithCaller(context.Background(), Caller{Subject: "ada", Scopes: []string{"a", "b"}})
	c, ok := CallerFrom(ctx)
	if !ok || c.Subject != "ada" || !c.HasScopes("a", "b") || c.HasScopes("a", "c") {
		t.Errorf("CallerFrom = %+v, %v", c, ok)
	}
	// A tool reads the caller from its context.
	who := MustNew("whoami", "", func(ctx context.Context, _ struct{}) (string, error) {
		c, _ := CallerFrom(ctx)
		return c.Subject, nil
	})
	var r Registry
	_ = r.Add(who)
	res, _ := r.Call(ctx, "whoami", nil)
	if res.Text() != "ada" {
		t.Errorf("tool saw caller %q", res.Text())
	}
}

func TestRequireScopes(t *testing.T) {
	guarded := MustNew("delete_customer", "", func(context.Context, greetIn) (string, error) { return "deleted", nil },
		Scopes("crm:write", "crm:admin"))
	var r Registry
	_ = r.Add(guarded, greeter(t, "open"))
	r.Use(RequireScopes())
	args := json.RawMessage(`{"name":"x"}`)
	tests := []struct {
		name    string
		ctx     context.Context
		tool    string
		allowed bool
	}{
		{"no caller", context.Background(), "delete_customer", false},
		{"missing one scope", WithCaller(context.Background(), Caller{Scopes: []string{"crm:write"}}), "delete_customer", false},
		{"all scopes", WithCaller(context.Background(), Caller{Scopes: []string{"crm:admin", "crm:write", "x"}}), "delete_customer", true},
		{"tool without scopes, no caller", context.Background(), "open", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Call(tt.ctx, tt.tool, args)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError == tt.allowed {
				t.Fatalf("allowed = %v, want %v: %s", !res.IsError, tt.allowed, res.Text())
			}
			if !tt.allowed && !strings.Contains(res.Text(), "requires the scopes crm:write, crm:admin") {
				t.Errorf("denial does not name the scopes: %s", res.Text())
			}
		})
	}
	strict := &Registry{PropagateErrors: true}
	_ = strict.Add(guarded)
	strict.Use(RequireScopes())
	if _, err := strict.Call(context.Background(), "delete_customer", args); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("err = %v, want ErrPermissionDenied", err)
	}
}

func TestAuthorize(t *testing.T) {
	errNotOwner := errors.New("only the owner may call this")
	r := &Registry{PropagateErrors: true}
	_ = r.Add(greeter(t, "g"))
	r.Use(Authorize(func(ctx context.Context, req *Request) error {
		if c, _ := CallerFrom(ctx); c.Subject != "owner" {
			return errNotOwner
		}
		return nil
	}))
	_, err := r.Call(context.Background(), "g", json.RawMessage(`{"name":"x"}`))
	if !errors.Is(err, ErrPermissionDenied) || !errors.Is(err, errNotOwner) {
		t.Errorf("err = %v, want both ErrPermissionDenied and the hook's error", err)
	}
	if _, err := r.Call(WithCaller(context.Background(), Caller{Subject: "owner"}), "g", json.RawMessage(`{"name":"x"}`)); err != nil {
		t.Errorf("owner denied: %v", err)
	}
}

func TestRecoverGuardsMiddleware(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r := &Registry{PropagateErrors: true}
	_ = r.Add(greeter(t, "g"))
	r.Use(Recover(logger), func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) { panic("middleware bug") }
	})
	_, err := r.Call(context.Background(), "g", nil)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "middleware bug" || !errors.Is(err, ErrPanic) {
		t.Fatalf("err = %v, want a *PanicError", err)
	}
	if !strings.Contains(logs.String(), "middleware bug") {
		t.Errorf("panic not logged: %s", logs.String())
	}
}

func TestToolPanicIsRecoveredAndLogged(t *testing.T) {
	var logs bytes.Buffer
	r := &Registry{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	_ = r.Add(MustNew("p", "", func(context.Context, greetIn) (string, error) { panic("nil map write") }))
	res, err := r.Call(context.Background(), "p", json.RawMessage(`{"name":"x"}`))
	if err != nil || !res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if strings.Contains(res.Text(), "nil map write") {
		t.Error("the panic value leaked to the model")
	}
	if !strings.Contains(logs.String(), "nil map write") || !strings.Contains(logs.String(), "tool=p") {
		t.Errorf("panic not logged: %s", logs.String())
	}
}

// blockingTool returns a tool that blocks until its context ends or release
// is closed, counting how many calls run at once.
func blockingTool(name string, running *atomic.Int32, peak *atomic.Int32, release <-chan struct{}, opts ...Option) *Tool {
	return MustNew(name, "", func(ctx context.Context, _ struct{}) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-release:
			return "done", nil
		}
	}, opts...)
}

func TestTimeouts(t *testing.T) {
	var running, peak atomic.Int32
	never := make(chan struct{})
	tests := []struct {
		name string
		tool *Tool
		mw   []Middleware
		want string
	}{
		{"tool option", blockingTool("slow", &running, &peak, never, Timeout(20*time.Millisecond)), nil, `tool "slow" did not finish within 20ms`},
		{"middleware", blockingTool("slow", &running, &peak, never), []Middleware{CallTimeout(20 * time.Millisecond)}, `tool "slow" did not finish within 20ms`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Registry{PropagateErrors: true}
			_ = r.Add(tt.tool)
			r.Use(tt.mw...)
			_, err := r.Call(context.Background(), "slow", nil)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if Outcome(nil, err) != "timeout" {
				t.Errorf("Outcome = %q, want timeout", Outcome(nil, err))
			}
		})
	}
}

func TestConcurrencyLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		mw   []Middleware
	}{
		{"tool option", []Option{MaxConcurrent(2)}, nil},
		{"middleware", nil, []Middleware{ConcurrencyLimit(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var running, peak atomic.Int32
			release := make(chan struct{})
			r := &Registry{PropagateErrors: true}
			_ = r.Add(blockingTool("b", &running, &peak, release, tc.opts...))
			r.Use(tc.mw...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() { _, _ = r.Call(ctx, "b", nil) })
			}
			// Wait, bounded, until both slots are taken.
			deadline := time.Now().Add(5 * time.Second)
			for running.Load() < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if running.Load() != 2 {
				t.Fatalf("%d calls running, want 2", running.Load())
			}
			// A third call cannot get a slot before its context ends.
			short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := r.Call(short, "b", nil)
			cancelShort()
			if !errors.Is(err, ErrBusy) {
				t.Errorf("third call: err = %v, want ErrBusy", err)
			}
			close(release)
			wg.Wait()
			if peak.Load() != 2 {
				t.Errorf("peak concurrency %d, want 2", peak.Load())
			}
		})
	}
}

func TestLogging(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var r Registry
	_ = r.Add(greeter(t, "g"))
	r.Use(Logging(logger))
	_, _ = r.Call(context.Background(), "g", json.RawMessage(`{"name":"Ada"}`))
	_, _ = r.Call(context.Background(), "g", json.RawMessage(`{"nme":"Ada"}`))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines: %s", len(lines), logs.String())
	}
	var ok, bad map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &ok)
	_ = json.Unmarshal([]byte(lines[1]), &bad)
	if ok["level"] != "INFO" || ok["tool"] != "g" || ok["outcome"] != "ok" || ok["arguments"] != `{"name":"Ada"}` || ok["duration"] == nil {
		t.Errorf("ok line: %v", ok)
	}
	if _, has := ok["result"]; has {
		t.Error("result logged at Info level")
	}
	if bad["level"] != "WARN" || bad["outcome"] != "invalid_arguments" {
		t.Errorf("bad line: %v", bad)
	}

	logs.Reset()
	debug := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var r2 Registry
	_ = r2.Add(greeter(t, "g"))
	r2.Use(Logging(debug))
	_, _ = r2.Call(context.Background(), "g", json.RawMessage(`{"name":"Ada"}`))
	if !strings.Contains(logs.String(), `"result":"Hello, Ada"`) {
		t.Errorf("result not logged at Debug level: %s", logs.String())
	}
}
