//nolint:staticcheck // MCP's logging and sampling are deprecated in 2026-07-28 and still served: relaying them is the point here.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 2025 backend asks for input (elicitation, sampling) with a request
// during the call, and waits for the answer; a 2026-07-28 client takes no
// request during a call, and answers an input_required result by calling
// again with inputResponses. The gateway bridges the two by parking the
// backend's call: it runs apart from the request that started it, and
// when the backend asks, that request is answered with input_required
// (requestState names the parked call); the client's retry delivers the
// answer to the waiting backend and waits for what comes next, the result
// or another question.
//
// A parked call lives in one replica: a retry that reaches another one
// gets an isError result that says so (with several replicas, route a
// client to one, as for sessions). Parked calls are bounded in number (in
// all and per caller) and each waits at most parkTimeout for its client's
// answer; then the backend's call is cancelled.

const (
	// parkPrefix starts the requestState of a parked call.
	parkPrefix = "toolplane-parked."
	// parkAskID is the id of a parked call's input request.
	parkAskID = "toolplane"
	// maxParked and maxParkedPerCaller bound the calls waiting for their
	// clients' answers; each holds a call slot, a connection to its
	// backend and a goroutine.
	maxParked          = 64
	maxParkedPerCaller = 8
)

// parkTimeout bounds the wait for a client's answer (a variable for the
// tests).
var parkTimeout = 2 * time.Minute

// outcomeInputRequired counts a call answered with input_required.
const outcomeInputRequired = "input_required"

// parkEvent is what a parked call's backend did next: asked (ask) or
// answered.
type parkEvent struct {
	ask             mcp.InputRequest
	res             *mcp.CallToolResult
	outcome, detail string
	resultBytes     int64 // read from the backend, for the audit line
}

// parkedCall is a backend call that may wait for its client's input.
type parkedCall struct {
	id, owner string
	// quota is whose maxParkedPerCaller it counts against: the owner, or
	// without auth (every caller's owner is "") the client's address.
	quota   string
	tool    string // the backend's route and the tool's name there
	rl      *relay // the relay the backend's call reports through
	events  chan parkEvent
	answers chan mcp.InputResponse
	cancel  context.CancelFunc
	// done ends with the backend's call: the SDK's context for the
	// backend's question does not.
	done <-chan struct{}

	asked mcp.InputRequest // what the client is asked now
	timer *time.Timer
	// asking lets one question at a time reach the client, so that an
	// answer goes to the question it answers.
	asking sync.Mutex
}

// parked holds the calls that wait for their clients.
type parked struct {
	mu       sync.Mutex
	calls    map[string]*parkedCall
	byCaller map[string]int
}

// parks reports whether the call may need parking: a 2026-07-28 client
// that can answer a question.
func (r *relay) parks() bool { return r != nil && r.modern && (r.elicit || r.sample) }

// parkable calls the MCP backend at route as mcpRoundTrip does, or resumes
// the parked call that the client's requestState names.
func (g *Gateway) parkable(ctx context.Context, c *Caller, route, name string, args json.RawMessage, header, out http.Header) (*mcp.CallToolResult, string, string) {
	rl := relayFrom(ctx)
	owner, quota := "", limitKeyOf(nil, header)
	if c != nil {
		owner = c.Key()
		quota = owner
	}
	// A parked call is its tool's at its backend: two ToolSets may serve
	// tools of one name.
	tool := route + "\x00" + name
	if id, ok := strings.CutPrefix(rl.req.Params.RequestState, parkPrefix); ok {
		return g.resume(ctx, rl, owner, id, tool)
	}
	pc := &parkedCall{id: rand.Text(), owner: owner, quota: quota, tool: tool, rl: rl,
		events: make(chan parkEvent), answers: make(chan mcp.InputResponse)}
	// The backend's call outlives this request when it parks: its context
	// keeps the request's values and not its end; the request's waiting
	// (wait) or the park's timeout cancel it.
	// It reports what it read to a call info of its own: the request that
	// started it may be over (and audited) when it ends; the request that
	// gets its result takes the figure (waitParked).
	own := &callInfo{requestID: requestIDFrom(ctx)}
	bctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), callInfoKey{}, own))
	pc.cancel, pc.done = cancel, bctx.Done()
	rl.setPark(pc)
	go func() {
		res, outcome, detail := g.mcpRoundTrip(bctx, route, name, args, header, out)
		select {
		case pc.events <- parkEvent{res: res, outcome: outcome, detail: detail, resultBytes: own.resultBytes}:
		case <-bctx.Done():
		}
	}()
	return g.waitParked(ctx, pc)
}

// waitParked waits, within ctx, for what pc's backend does next: its
// result, or a question for the client, which parks pc.
func (g *Gateway) waitParked(ctx context.Context, pc *parkedCall) (*mcp.CallToolResult, string, string) {
	select {
	case ev := <-pc.events:
		if ev.ask == nil {
			pc.cancel()
			if ci := callInfoFrom(ctx); ci != nil {
				ci.resultBytes = ev.resultBytes
			}
			return ev.res, ev.outcome, ev.detail
		}
		if !g.park(pc, ev.ask) {
			pc.cancel()
			return errorResult(fmt.Sprintf("the tool asks for your input, and too many calls wait for their clients' input already (at most %d, %d for one caller); retry later", maxParked, maxParkedPerCaller)), outcomeBusy, ""
		}
		return inputRequired(ev.ask, parkPrefix+pc.id), outcomeInputRequired, ""
	case <-ctx.Done():
		pc.cancel()
		return g.failure(ctx, ctx.Err())
	}
}

// park keeps pc, asking ask, until its client answers or parkTimeout.
func (g *Gateway) park(pc *parkedCall, ask mcp.InputRequest) bool {
	p := &g.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls, p.byCaller = map[string]*parkedCall{}, map[string]int{}
	}
	if len(p.calls) >= maxParked || p.byCaller[pc.quota] >= maxParkedPerCaller {
		return false
	}
	p.calls[pc.id] = pc
	p.byCaller[pc.quota]++
	pc.asked = ask
	pc.timer = time.AfterFunc(parkTimeout, func() {
		if g.unpark(pc.id) != nil {
			pc.cancel()
		}
	})
	return true
}

// unpark takes the call id out of the parked ones, or returns nil.
func (g *Gateway) unpark(id string) *parkedCall { return g.unparkFor(id, nil) }

// unparkFor takes the call id out of the parked ones when mine says it is
// the retry's (nil: whoever asks), or returns nil. The check is made under
// the lock, so that a retry that is not the call's own leaves it as it
// was: parked under its own timeout, which no one else's retry renews, and
// there for its own client's retry at every moment.
func (g *Gateway) unparkFor(id string, mine func(*parkedCall) bool) *parkedCall {
	p := &g.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.calls[id]
	if pc == nil || (mine != nil && !mine(pc)) {
		return nil
	}
	delete(p.calls, id)
	if p.byCaller[pc.quota]--; p.byCaller[pc.quota] <= 0 {
		delete(p.byCaller, pc.quota)
	}
	pc.timer.Stop()
	return pc
}

// resume delivers the client's answer to the parked call id and waits for
// what its backend does next.
func (g *Gateway) resume(ctx context.Context, rl *relay, owner, id, tool string) (*mcp.CallToolResult, string, string) {
	// Not this caller's, or not this tool's: it stays parked for its own.
	pc := g.unparkFor(id, func(pc *parkedCall) bool { return pc.owner == owner && pc.tool == tool })
	if pc == nil {
		return errorResult(fmt.Sprintf("no call of this tool waits for input under this requestState at this gateway: it ended, waited longer than %s, or waits at another replica; call the tool again", parkTimeout)), outcomeToolError, ""
	}
	answer, ok := answerFor(pc.asked, rl.req.Params.InputResponses[parkAskID])
	if !ok {
		pc.cancel()
		return errorResult("the retry carries no answer to the tool's question (inputResponses." + parkAskID + "); call the tool again"), outcomeToolError, ""
	}
	// What the backend says from now on goes to this request's stream.
	pc.rl.rebind(rl)
	select {
	case pc.answers <- answer:
	case <-ctx.Done():
		pc.cancel()
		return g.failure(ctx, ctx.Err())
	}
	return g.waitParked(ctx, pc)
}

// answerFor is the client's response r to the question ask, as the
// backend's 2025 request wants it.
func answerFor(ask mcp.InputRequest, r mcp.InputResponse) (mcp.InputResponse, bool) {
	switch ask.(type) {
	case *mcp.ElicitParams:
		res, ok := r.(*mcp.ElicitResult)
		return res, ok && res != nil
	case *mcp.CreateMessageParams:
		switch res := r.(type) {
		case *mcp.CreateMessageResult:
			return res, res != nil
		case *mcp.CreateMessageWithToolsResult:
			if res == nil || len(res.Content) != 1 {
				return nil, false
			}
			return &mcp.CreateMessageResult{Meta: res.Meta, Content: res.Content[0], Model: res.Model, Role: res.Role, StopReason: res.StopReason}, true
		}
	}
	return nil, false
}

// inputRequired is a result of resultType input_required asking ask.
func inputRequired(ask mcp.InputRequest, state string) *mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"input_required"}`), &r); err != nil {
		panic(err)
	}
	r.Content = nil
	r.InputRequests = mcp.InputRequestMap{parkAskID: ask}
	r.RequestState = state
	return &r
}

// errParkEnded answers a backend's question whose call ended first.
var errParkEnded = errors.New("the call waiting for the client's answer ended")

// ask puts the backend's question to the client through the request that
// waits, and returns the client's answer, within ctx (the backend's).
func (pc *parkedCall) ask(ctx context.Context, q mcp.InputRequest) (mcp.InputResponse, error) {
	pc.asking.Lock()
	defer pc.asking.Unlock()
	select {
	case pc.events <- parkEvent{ask: q}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-pc.done:
		return nil, errParkEnded
	}
	select {
	case a := <-pc.answers:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-pc.done:
		return nil, errParkEnded
	}
}

func (r *relay) setPark(pc *parkedCall) {
	r.mu.Lock()
	r.park = pc
	r.mu.Unlock()
}

func (r *relay) parkOf() *parkedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.park
}

// rebind makes r write to the client's request of next, the retry that
// resumed r's parked call.
func (r *relay) rebind(next *relay) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.req, r.ctx, r.gone = next.req, next.ctx, false
	r.token = next.token
}

// cancelParked ends every parked call, for Close.
func (g *Gateway) cancelParked() {
	p := &g.parked
	p.mu.Lock()
	ids := make([]string, 0, len(p.calls))
	for id := range p.calls {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		if pc := g.unpark(id); pc != nil {
			pc.cancel()
		}
	}
}
