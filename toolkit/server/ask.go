package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
)

// A tool asks its user with [toolkit.Ask] (or [Elicit]); the call's asker
// puts the question to the client in the way of the client's era:
//   - 2025: elicitation/create during the call, on the call's stream, and
//     Ask returns the answer;
//   - 2026-07-28 (SEP-2322, multi round-trip): Ask returns
//     toolkit.ErrInputRequired, the tool returns it, and the call's result
//     is input_required with the question under the id the tool gave it.
//     The client calls again with inputResponses; the tool runs again, and
//     Ask finds the answer there. The answers of earlier rounds travel in
//     requestState, so that a tool may ask one question after another.
//
// requestState and inputResponses are the client's word: an answer in
// them is what the user (or the client) says, as an answer to
// elicitation/create would be. They are bounded (maxAskState,
// maxAskAnswers); a state that is not toolkit's, or is over its bounds, is
// ignored, and the tool's questions are asked again.

const (
	// askStatePrefix starts the requestState of toolkit's asker.
	askStatePrefix = "toolkit.ask.v1."
	// maxAskState bounds the requestState read; maxAskAnswers the answers
	// it holds.
	maxAskState   = 64 << 10
	maxAskAnswers = 32
	// maxAskID bounds a question's id.
	maxAskID = 128
)

// asker is one call's [toolkit.Asker].
type asker struct {
	req      *mcp.CallToolRequest
	modern   bool
	elicits  bool
	previous map[string]*mcp.ElicitResult // answered in earlier rounds

	mu      sync.Mutex
	used    map[string]*mcp.ElicitResult // answers the tool took this run
	pending mcp.InputRequestMap
}

// newAsker returns the asker of req's call, or nil when it has no client to
// ask (then toolkit.Ask returns toolkit.ErrCannotAsk).
func newAsker(req *mcp.CallToolRequest) *asker {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	a := &asker{req: req}
	ip := req.Session.InitializeParams()
	a.modern = ip == nil || ip.ProtocolVersion >= modernProtocol
	caps := req.ClientCapabilities()
	a.elicits = caps != nil && caps.Elicitation != nil
	if a.modern {
		a.previous = decodeAskState(req.Params.RequestState)
	}
	return a
}

// Ask implements [toolkit.Asker].
func (a *asker) Ask(ctx context.Context, id string, q toolkit.Question) (toolkit.Answer, error) {
	res, err := a.elicit(ctx, id, &mcp.ElicitParams{Message: q.Message, RequestedSchema: q.Schema})
	if err != nil {
		return toolkit.Answer{}, err
	}
	return toolkit.Answer{Action: res.Action, Content: res.Content}, nil
}

func (a *asker) elicit(ctx context.Context, id string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if id == "" || len(id) > maxAskID {
		return nil, fmt.Errorf("server: a question's id is 1 to %d bytes, not %d", maxAskID, len(id))
	}
	if !a.elicits {
		return nil, fmt.Errorf("%w: %w", ErrElicitationUnsupported, toolkit.ErrCannotAsk)
	}
	if !a.modern {
		res, err := a.req.Session.Elicit(ctx, p)
		if err != nil && strings.Contains(err.Error(), "does not support") {
			return nil, fmt.Errorf("%w: %w: %w", ErrElicitationUnsupported, toolkit.ErrCannotAsk, err)
		}
		return res, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var res *mcp.ElicitResult
	if r := a.previous[id]; r != nil && answersForm(r, p.RequestedSchema) {
		res = r
	}
	if r, ok := a.req.Params.InputResponses[id].(*mcp.ElicitResult); ok && validAnswer(r) && answersForm(r, p.RequestedSchema) {
		res = r
	}
	if res != nil {
		if a.used == nil {
			a.used = map[string]*mcp.ElicitResult{}
		}
		a.used[id] = res
		return res, nil
	}
	if a.pending == nil {
		a.pending = mcp.InputRequestMap{}
	}
	a.pending[id] = p
	return nil, fmt.Errorf("server: the tool asks its user %q: %w", id, toolkit.ErrInputRequired)
}

// inputRequired is the call's input_required result, or nil when the tool
// asked nothing that waits for an answer.
func (a *asker) inputRequired() *mcp.CallToolResult {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return nil
	}
	return &mcp.CallToolResult{InputRequests: a.pending, RequestState: encodeAskState(a.used)}
}

// validAnswer reports whether r is an answer elicitation allows.
func validAnswer(r *mcp.ElicitResult) bool {
	if r == nil {
		return false
	}
	switch r.Action {
	case "accept", "decline", "cancel":
		return true
	}
	return false
}

// answersForm reports whether r's content fits the question's schema, as
// the SDK checks a 2025 client's answer to elicitation/create: an answer
// that does not is none, and the question is asked again.
func answersForm(r *mcp.ElicitResult, schema any) bool {
	if r.Action != "accept" || r.Content == nil || schema == nil {
		return true
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(b, &js); err != nil {
		return false
	}
	resolved, err := js.Resolve(nil)
	if err != nil {
		return false
	}
	return resolved.Validate(r.Content) == nil
}

func encodeAskState(answers map[string]*mcp.ElicitResult) string {
	if len(answers) == 0 {
		return ""
	}
	b, err := json.Marshal(answers)
	if err != nil {
		return ""
	}
	return askStatePrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeAskState is the answers of earlier rounds that state carries, or
// nil when it is not toolkit's, or is over its bounds.
func decodeAskState(state string) map[string]*mcp.ElicitResult {
	enc, ok := strings.CutPrefix(state, askStatePrefix)
	if !ok || base64.RawURLEncoding.DecodedLen(len(enc)) > maxAskState {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil
	}
	var answers map[string]*mcp.ElicitResult
	if err := json.Unmarshal(b, &answers); err != nil || len(answers) > maxAskAnswers {
		return nil
	}
	for id, r := range answers {
		if len(id) > maxAskID || !validAnswer(r) {
			delete(answers, id)
		}
	}
	return answers
}

// elicitID is the id of a question asked with [Elicit], which has none:
// the question itself, so that the same question gets the same answer.
func elicitID(p *mcp.ElicitParams) string {
	b, _ := json.Marshal(struct {
		M string `json:"m"`
		S any    `json:"s"`
	}{p.Message, p.RequestedSchema})
	sum := sha256.Sum256(b)
	return "elicit-" + hex.EncodeToString(sum[:8])
}

type askerOfKey struct{}

// askerOf is the asker of the call whose context ctx is.
func askerOf(ctx context.Context) *asker {
	a, _ := ctx.Value(askerOfKey{}).(*asker)
	return a
}

// errNoQuestion says a tool returned toolkit.ErrInputRequired without a
// question waiting.
var errNoQuestion = errors.New("the tool returned toolkit.ErrInputRequired and asked no question that waits for an answer")
