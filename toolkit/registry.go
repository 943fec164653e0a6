package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Registry holds a service's tools and is the one call path of every
// transport: the HTTP invoke handler, MCP's tools/call and direct calls all
// go through [Registry.Call], so middleware and binding behave the same
// everywhere.
//
// The zero value is an empty registry ready to use. It is safe for
// concurrent use; set its fields before first use.
type Registry struct {
	// PropagateErrors makes Call return an argument error (an
	// [*ArgumentError]) or the tool's own error, instead of a result with
	// IsError set that describes it to the model.
	PropagateErrors bool
	// Logger receives recovered panics and warnings about tool names; nil
	// means slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex // serializes changes; calls read state without it
	state   atomic.Pointer[registryState]
	mws     []Middleware
	subs    map[int]func()
	nextSub int
}

// registryState is an immutable snapshot: a change builds a new one, so a
// call never takes a lock.
type registryState struct {
	tools    map[string]*Tool
	sorted   []*Tool
	specs    []spec.Tool
	revision string
	handler  CallHandler
}

func (r *Registry) load() *registryState {
	if st := r.state.Load(); st != nil {
		return st
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current()
}

// current is load for a caller that holds r.mu.
func (r *Registry) current() *registryState {
	if st := r.state.Load(); st != nil {
		return st
	}
	st := r.build(nil)
	r.state.Store(st)
	return st
}

// build makes a snapshot of tools with the current middleware. r.mu must be
// held.
func (r *Registry) build(tools map[string]*Tool) *registryState {
	st := &registryState{tools: tools, specs: []spec.Tool{}}
	for _, t := range tools {
		st.sorted = append(st.sorted, t)
	}
	slices.SortFunc(st.sorted, func(a, b *Tool) int {
		switch {
		case a.spec.Name < b.spec.Name:
			return -1
		case a.spec.Name > b.spec.Name:
			return 1
		}
		return 0
	})
	for _, t := range st.sorted {
		st.specs = append(st.specs, t.spec)
	}
	st.revision = spec.Revision(st.specs)
	st.handler = r.callTool
	for i := len(r.mws) - 1; i >= 0; i-- {
		st.handler = r.mws[i](st.handler)
	}
	return st
}

func (r *Registry) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Add registers tools. A name that is invalid, already registered, or given
// twice is an error wrapping [ErrInvalidName] or [ErrDuplicateTool], and
// then nothing is added. A name that is valid but not portable to
// OpenAI-style function calling (see [PortableName]) is added, with a
// warning in the log.
func (r *Registry) Add(tools ...*Tool) error {
	r.mu.Lock()
	old := r.current().tools
	next := make(map[string]*Tool, len(old)+len(tools))
	for name, t := range old {
		next[name] = t
	}
	for _, t := range tools {
		if t == nil {
			r.mu.Unlock()
			return errors.New("toolkit: nil tool")
		}
		name := t.Name()
		if err := CheckName(name); err != nil {
			r.mu.Unlock()
			return err
		}
		if _, dup := next[name]; dup {
			r.mu.Unlock()
			return fmt.Errorf("%w: %q", ErrDuplicateTool, name)
		}
		next[name] = t
	}
	r.state.Store(r.build(next))
	subs := r.subscribers()
	r.mu.Unlock()
	for _, t := range tools {
		if !PortableName(t.Name()) {
			r.logger().Warn("Tool name is not portable to OpenAI-style function calling (^[a-zA-Z0-9_-]{1,64}$)", "tool", t.Name())
		}
	}
	notify(subs)
	return nil
}

// Remove unregisters the named tools and returns how many were registered.
func (r *Registry) Remove(names ...string) int {
	r.mu.Lock()
	old := r.current().tools
	next := make(map[string]*Tool, len(old))
	for name, t := range old {
		next[name] = t
	}
	n := 0
	for _, name := range names {
		if _, ok := next[name]; ok {
			delete(next, name)
			n++
		}
	}
	if n == 0 {
		r.mu.Unlock()
		return 0
	}
	r.state.Store(r.build(next))
	subs := r.subscribers()
	r.mu.Unlock()
	notify(subs)
	return n
}

// Lookup returns the named tool.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, ok := r.load().tools[name]
	return t, ok
}

// Tools returns the registered tools, sorted by name.
func (r *Registry) Tools() []*Tool {
	return slices.Clone(r.load().sorted)
}

// Specs returns the registered tools as MCP describes them, sorted by name.
// The schemas are shared: do not modify them.
func (r *Registry) Specs() []spec.Tool {
	return slices.Clone(r.load().specs)
}

// Revision returns [spec.Revision] of [Registry.Specs]. It is computed once
// per change, and changes if and only if the tool list changes.
func (r *Registry) Revision() string {
	return r.load().revision
}

// Subscribe registers fn to be called after every change of the tool list,
// in the goroutine that made the change and outside the registry's lock, so
// fn may call back into the registry. The returned function cancels the
// subscription.
func (r *Registry) Subscribe(fn func()) (cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs == nil {
		r.subs = map[int]func(){}
	}
	id := r.nextSub
	r.nextSub++
	r.subs[id] = fn
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.subs, id)
	}
}

func (r *Registry) subscribers() []func() {
	ids := make([]int, 0, len(r.subs))
	for id := range r.subs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fns := make([]func(), len(ids))
	for i, id := range ids {
		fns[i] = r.subs[id]
	}
	return fns
}

func notify(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

// Use appends middleware. The first one given is the outermost: it sees
// each call first and its result last.
func (r *Registry) Use(mw ...Middleware) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mws = append(r.mws, mw...)
	r.state.Store(r.build(r.current().tools))
}

// Call calls the named tool with a model's raw JSON arguments (an object,
// possibly sloppy: see the package documentation).
//
// An unknown tool is an error wrapping [ErrToolNotFound]. Bad arguments and
// the tool's own errors are results with IsError set and a nil error, unless
// [Registry.PropagateErrors] is set; then Call returns the [*ArgumentError]
// or the tool's error. Arguments larger than [MaxArgumentBytes] are
// refused before the middleware runs. A panic anywhere in the middleware
// or the tool is recovered into an error matching [ErrPanic], always.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (*spec.CallResult, error) {
	st := r.load()
	t, ok := st.tools[name]
	if !ok {
		return nil, st.notFound(name)
	}
	var res *spec.CallResult
	var err error
	req := &Request{Tool: t, Arguments: args}
	if len(args) > MaxArgumentBytes {
		err = &ArgumentError{Tool: name, Problems: []Problem{{Path: "$",
			Expected: "arguments of at most " + strconv.Itoa(MaxArgumentBytes>>10) + " KiB",
			Received: strconv.Itoa(len(args)) + " bytes"}}}
	} else {
		res, err = r.handle(ctx, st.handler, req)
	}
	if len(req.secrets) > 0 {
		// What the model reads of a failure never quotes a secret back.
		err = redactError(err, req.secrets)
		if res != nil && res.IsError {
			res = redactResult(res, req.secrets)
		}
	}
	if err != nil {
		// A question for the user goes to the transport that asks it
		// (ask.go), which answers the call with it.
		if r.PropagateErrors || (errors.Is(err, ErrInputRequired) && askerFrom(ctx) != nil) {
			return nil, err
		}
		return errorResult(err), nil
	}
	if res == nil {
		res = successResult()
	}
	return res, nil
}

// handle runs the middleware chain and the tool, and turns a panic anywhere
// in it into an error matching [ErrPanic]. The MCP SDK runs handlers
// without a recover, so a panic that got past this would end the process;
// no option turns this off.
func (r *Registry) handle(ctx context.Context, h CallHandler, req *Request) (res *spec.CallResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, recovered(ctx, r.logger(), req.Tool.Name(), v)
		}
	}()
	return h(ctx, req)
}

// Nearest returns the registered tool name most likely meant by name, an
// unknown one: the closest by edit distance, if it is close enough to be a
// misspelling. Transports add it to their "no such tool" replies.
func (r *Registry) Nearest(name string) (string, bool) {
	st := r.load()
	names := make([]string, len(st.sorted))
	for i, t := range st.sorted {
		names[i] = t.Name()
	}
	near := nearest(name, names)
	return near, near != ""
}

// notFound is the error for an unknown tool, naming the tool most likely
// meant when one is close.
func (st *registryState) notFound(name string) error {
	names := make([]string, len(st.sorted))
	for i, t := range st.sorted {
		names[i] = t.Name()
	}
	if near := nearest(name, names); near != "" {
		return fmt.Errorf("%w: %q (did you mean %q?)", ErrToolNotFound, name, near)
	}
	return fmt.Errorf("%w: %q", ErrToolNotFound, name)
}

// callTool is the innermost handler: the tool's own timeout and
// concurrency limit, binding, the call, and the recovery of a panic.
func (r *Registry) callTool(ctx context.Context, req *Request) (res *spec.CallResult, err error) {
	t := req.Tool
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	if t.sem != nil {
		if err := acquire(ctx, t.sem, t.Name()); err != nil {
			return nil, err
		}
		defer func() { <-t.sem }()
	}
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, recovered(ctx, r.logger(), t.Name(), v)
		}
	}()
	if t.plan.anySensitive {
		if rep, ok := ctx.Value(reporterKey{}).(Reporter); ok {
			// What the tool reports to its caller is scrubbed too.
			ctx = WithReporter(ctx, redactingReporter{next: rep, req: req})
		}
		if a := askerFrom(ctx); a != nil {
			ctx = WithAsker(ctx, redactingAsker{next: a, req: req})
		}
	}
	res, err = t.call(ctx, req.Arguments, &req.secrets)
	if ee := (*encodeError)(nil); errors.As(err, &ee) {
		r.logger().ErrorContext(ctx, "Encoding a tool's result failed", "tool", t.Name(), "error", ee.err.Error())
	}
	if t.timeout > 0 {
		err = timedOut(ctx, err, t.Name(), t.timeout)
	}
	return res, err
}
