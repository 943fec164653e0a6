package toolkit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Without Recover in the chain, a panicking middleware is still an error
// result: no option, and no option left out, lets a panic through.
func TestMiddlewarePanicIsRecoveredWithoutRecover(t *testing.T) {
	var logs bytes.Buffer
	r := &Registry{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	_ = r.Add(greeter(t, "g"))
	r.Use(func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *Request) (*spec.CallResult, error) { panic("middleware bug") }
	})
	res, err := r.Call(context.Background(), "g", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "internal error") || strings.Contains(res.Text(), "bug") {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if !strings.Contains(logs.String(), "middleware bug") {
		t.Errorf("panic not logged: %s", logs.String())
	}
	r.PropagateErrors = true
	if _, err := r.Call(context.Background(), "g", nil); !errors.Is(err, ErrPanic) {
		t.Errorf("propagated err = %v, want ErrPanic", err)
	}
}

// Every zero-valued limit means "no limit", and every call succeeds under
// it, however many run at once.
func TestZeroValuedOptionsMeanNoLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		mw   []Middleware
	}{
		{"Timeout(0)", []Option{Timeout(0)}, nil},
		{"MaxConcurrent(0)", []Option{MaxConcurrent(0)}, nil},
		{"CallTimeout(0)", nil, []Middleware{CallTimeout(0)}},
		{"ConcurrencyLimit(0)", nil, []Middleware{ConcurrencyLimit(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Registry{PropagateErrors: true}
			if err := r.Add(MustNew("slowish", "", func(ctx context.Context, _ struct{}) (string, error) {
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(5 * time.Millisecond):
					return "done", nil
				}
			}, tc.opts...)); err != nil {
				t.Fatal(err)
			}
			r.Use(tc.mw...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs := make(chan error, 8)
			for range 8 {
				go func() {
					res, err := r.Call(ctx, "slowish", nil)
					if err == nil && res.Text() != "done" {
						err = errors.New(res.Text())
					}
					errs <- err
				}()
			}
			for range 8 {
				if err := <-errs; err != nil {
					t.Errorf("call: %v", err)
				}
			}
		})
	}
}

func TestNegativeOptionsAreRefusedWhenBuilt(t *testing.T) {
	for name, opt := range map[string]Option{"Timeout": Timeout(-time.Second), "MaxConcurrent": MaxConcurrent(-1)} {
		_, err := New("t", "", func(context.Context, struct{}) (string, error) { return "", nil }, opt)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want ErrInvalidOption naming it", name, err)
		}
	}
	for name, build := range map[string]func(){
		"CallTimeout":      func() { CallTimeout(-time.Second) },
		"ConcurrencyLimit": func() { ConcurrencyLimit(-1) },
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), name) {
					t.Errorf("%s: recovered %v, want ErrInvalidOption naming it", name, err)
				}
			}()
			build()
		}()
	}
}
