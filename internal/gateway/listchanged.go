package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"
)

// notifications/tools/list_changed goes only to the listeners it concerns.
//
// The SDK sends it to every session and every subscriptions/listen
// stream when the placeholder tool is replaced. The gateway keeps, for
// each listener, its view, its caller and the table it last heard about;
// when a new table arrives, one goroutine (the notifier) works out which
// listeners it concerns, marks them, and then replaces the placeholder; a
// sending middleware drops the notification for every listener not
// marked. A new table concerns a listener when a tool of its view was
// added, removed or changed as tools/list shows it (name, description,
// schemas, annotations, _meta; not its endpoint or limits), and, under
// auth, when the listener may call one of those tools, in the old table
// or the new (asked through Gateway.permitted, within the review budget of
// one request and listenDecisionTimeout). A decision that cannot be made
// in time sends the notification: a needless list_changed costs a list,
// a missing one leaves a client with a stale list. The search endpoints'
// lists (the two meta-tools) never change, so their listeners hear
// nothing. A session or stream the gateway has not seen a request of
// (none today) is sent every notification, as before.

// listenDecisionTimeout bounds the authorization of one listener's
// notification; listenConcurrency the listeners decided at once.
const (
	listenDecisionTimeout = 2 * time.Second
	listenConcurrency     = 16
)

// notificationToolListChanged is the method of the notification.
const notificationToolListChanged = "notifications/tools/list_changed"

// statefulHeader marks a request that serveMCP or serveSearchMCP routed to
// the 2025-era session handler, for listenMiddleware; it replaces whatever
// a client sent.
const statefulHeader = "Toolplane-Gateway-Session"

// listener is one session or stream that may be sent list_changed.
type listener struct {
	view    view
	search  bool
	caller  *Caller
	known   atomic.Pointer[snapshot] // the table it last heard about
	pending atomic.Bool              // a change concerns it, not yet sent
}

// listeners are the listeners by session.
type listeners struct {
	mu sync.Mutex
	m  map[*mcp.ServerSession]*listener
}

func (ls *listeners) get(ss *mcp.ServerSession) *listener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[ss]
}

// add records ss as l unless it is recorded already; it reports whether it
// did.
func (ls *listeners) add(ss *mcp.ServerSession, l *listener) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if _, ok := ls.m[ss]; ok {
		return false
	}
	if ls.m == nil {
		ls.m = map[*mcp.ServerSession]*listener{}
	}
	ls.m[ss] = l
	return true
}

func (ls *listeners) remove(ss *mcp.ServerSession) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.m, ss)
}

func (ls *listeners) all() []*listener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]*listener, 0, len(ls.m))
	for _, l := range ls.m {
		out = append(out, l)
	}
	return out
}

func (g *Gateway) newListener(h http.Header, c *Caller) *listener {
	l := &listener{view: viewFrom(h), search: h.Get(searchHeader) != "", caller: c}
	l.known.Store(g.snapshot())
	return l
}

// listenMiddleware records each subscriptions/listen stream for as long as
// it is open, and each 2025-era session from its first request until it
// closes, with the view and caller of that request.
func (g *Gateway) listenMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ss == nil {
			return next(ctx, method, req)
		}
		header, token := extraOf(req)
		switch {
		case method == methodListen:
			if g.listeners.add(ss, g.newListener(header, callerFrom(token))) {
				defer g.listeners.remove(ss)
			}
		case header.Get(statefulHeader) != "":
			if g.listeners.add(ss, g.newListener(header, callerFrom(token))) {
				go func() {
					_ = ss.Wait()
					g.listeners.remove(ss)
				}()
			}
		}
		return next(ctx, method, req)
	}
}

// filterListChanged is the sending middleware that drops list_changed for
// the listeners it does not concern.
func (g *Gateway) filterListChanged(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == notificationToolListChanged {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				if l := g.listeners.get(ss); l != nil && !l.pending.Swap(false) {
					g.metrics.listChanged.WithLabelValues("skipped").Inc()
					return nil, nil
				}
			}
			g.metrics.listChanged.WithLabelValues("sent").Inc()
		}
		return next(ctx, method, req)
	}
}

// notifyTables is the notifier: after each new table (coalescing those
// that arrive while it works) it marks the listeners the change concerns
// and has the SDK send list_changed.
func (g *Gateway) notifyTables() {
	for {
		select {
		case <-g.done:
			return
		case <-g.tableChanged:
		}
		cur := g.snapshot()
		g.markListeners(cur)
		g.server.AddTool(placeholderTool(cur.table.Revision), placeholderHandler)
	}
}

// markListeners decides, for each listener, whether what changed between
// the table it last heard about and cur concerns it.
func (g *Gateway) markListeners(cur *snapshot) {
	diffs := map[*snapshot]*tableDiff{}
	var eg errgroup.Group
	eg.SetLimit(listenConcurrency)
	for _, l := range g.listeners.all() {
		old := l.known.Load()
		if old == cur {
			continue
		}
		d, ok := diffs[old]
		if !ok {
			d = diffTables(old, cur)
			diffs[old] = d
		}
		eg.Go(func() error {
			if g.concerns(l, old, cur, d) {
				l.pending.Store(true)
			}
			l.known.CompareAndSwap(old, cur)
			return nil
		})
	}
	_ = eg.Wait()
}

// tableDiff is what changed from one table to the next, as tools/list
// shows it: the indexes, in each, of the tools added, removed or changed.
type tableDiff struct{ old, cur []int }

func diffTables(old, cur *snapshot) *tableDiff {
	d := &tableDiff{}
	for i := range cur.table.Tools {
		j, ok := old.byName[cur.table.Tools[i].Name]
		switch {
		case !ok:
			d.cur = append(d.cur, i)
		case (old.routes[j] == "") != (cur.routes[i] == "") ||
			old.table.Tools[j].ToolSet != cur.table.Tools[i].ToolSet ||
			!bytes.Equal(old.entries[j], cur.entries[i]) && !sameListing(old.tools[j], cur.tools[i]):
			d.cur = append(d.cur, i)
			d.old = append(d.old, j)
		}
	}
	for j := range old.table.Tools {
		if _, ok := cur.byName[old.table.Tools[j].Name]; !ok {
			d.old = append(d.old, j)
		}
	}
	return d
}

// sameListing reports whether two tools show the same in tools/list.
func sameListing(a, b *mcp.Tool) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// concerns reports whether d, from old to cur, concerns l.
func (g *Gateway) concerns(l *listener, old, cur *snapshot, d *tableDiff) bool {
	if l.search {
		return false
	}
	inView := func(s *snapshot, idx []int) []int {
		return slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return !l.view.contains(s, i) })
	}
	was, is := inView(old, d.old), inView(cur, d.cur)
	if len(was) == 0 && len(is) == 0 {
		return false
	}
	if g.opts.Auth == nil {
		return true
	}
	if l.caller == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), listenDecisionTimeout)
	defer cancel()
	ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
	for _, side := range []struct {
		s   *snapshot
		idx []int
	}{{cur, is}, {old, was}} {
		if len(side.idx) == 0 {
			continue
		}
		ok, err := g.permitted(ctx, l.caller, side.s, side.idx)
		if err != nil {
			return true // undecided: say so rather than leave a stale list
		}
		if slices.Contains(ok, true) {
			return true
		}
	}
	return false
}
