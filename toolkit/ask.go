package toolkit

import (
	"context"
	"errors"
)

// Question is what a tool asks its user while it runs: a message and the
// form of the answer, a JSON Schema of an object whose properties are
// primitives (string, number, integer, boolean, enum), as MCP elicitation
// wants it. A nil Schema asks only to accept or decline.
type Question struct {
	Message string
	Schema  map[string]any
}

// Answer is the user's answer to a [Question]: Action is "accept",
// "decline" or "cancel", and Content the form's values when accepted.
type Answer struct {
	Action  string
	Content map[string]any
}

// Accepted reports whether the user accepted, with the form filled in.
func (a Answer) Accepted() bool { return a.Action == "accept" }

// Asker puts a tool's questions to the user of the client that called it.
// A transport puts one in the call's context with [WithAsker]; the MCP
// transport of toolkit/server asks with MCP elicitation.
type Asker interface {
	// Ask returns the user's answer to q, which id names within the call,
	// or an error matching [ErrInputRequired] when the answer comes with
	// the call's next round (the tool then returns that error and runs
	// again), or [ErrCannotAsk].
	Ask(ctx context.Context, id string, q Question) (Answer, error)
}

var (
	// ErrInputRequired is returned by [Ask] when the user's answer comes in
	// a later round of the call: the 2026-07-28 era of MCP answers the call
	// with the question (an input_required result), and the client calls
	// again with the answer, which runs the tool again from the start.
	// Return it (wrapped or not) from the tool; do nothing before Ask that
	// should not be done twice.
	ErrInputRequired = errors.New("toolkit: the tool needs its user's answer")
	// ErrCannotAsk is returned by [Ask] when the call has no user to ask:
	// it did not come over MCP, or its client did not declare it can
	// answer. The tool carries on without, or fails saying what it needs.
	ErrCannotAsk = errors.New("toolkit: the caller cannot be asked for input")
)

type askerKey struct{}

// WithAsker returns ctx carrying a, for the tool a transport calls.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

func askerFrom(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// Ask asks the user of the client that called the tool q, and returns the
// answer. id names the question within the call: a tool that asks several
// gives each its own, the same every time the tool runs. Over MCP, a
// client of the 2025 era is asked during the call (elicitation/create); in
// the 2026-07-28 era Ask returns [ErrInputRequired] the first time, which
// the tool returns, and the call's result is the question; the client
// calls again with the answer, the tool runs again, and Ask returns the
// answer. Without a client that can answer, Ask returns [ErrCannotAsk].
// Declare a tool that asks with [Asks], so that the toolplane gateway
// calls it where it can ask.
//
//	ans, err := toolkit.Ask(ctx, "confirm", toolkit.Question{Message: "Delete " + in.Name + "?"})
//	if err != nil {
//		return out, err
//	}
//	if !ans.Accepted() {
//		return out, errors.New("not deleted: the user declined")
//	}
func Ask(ctx context.Context, id string, q Question) (Answer, error) {
	if a := askerFrom(ctx); a != nil {
		return a.Ask(ctx, id, q)
	}
	return Answer{}, ErrCannotAsk
}

// redactingAsker scrubs the sensitive values of a call from the questions
// its tool asks.
type redactingAsker struct {
	next Asker
	req  *Request
}

func (r redactingAsker) Ask(ctx context.Context, id string, q Question) (Answer, error) {
	q.Message = r.req.Redact(q.Message)
	return r.next.Ask(ctx, id, q)
}
