package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// The call slots (Options.MaxConcurrentCalls) are the gateway's, for every
// tenant together. Without a share, one namespace's slow workload, called
// often enough (by its own tenant, who controls both), held every slot,
// and every other tenant's calls waited the call timeout and failed busy.
// A namespace's calls in flight are therefore bounded to a share of the
// slots; a call over its namespace's share waits for one of that
// namespace's own calls to end, holding no slot meanwhile.

// namespaceShareDivisor: by default a namespace may hold at most
// MaxConcurrentCalls/namespaceShareDivisor (at least one) of the slots
// (Options.MaxConcurrentCallsPerNamespace).
const namespaceShareDivisor = 4

// callShares bounds the calls in flight per namespace. The zero value is
// ready; an entry lives while a call of its namespace holds or waits for
// it, so the map is bounded by the calls in flight.
type callShares struct {
	mu sync.Mutex
	m  map[string]*callShare
	// spare is a share whose namespace's calls all ended, kept for the
	// next namespace that has none: a sequence of calls, each alone in
	// its namespace, made a semaphore and a share each.
	spare *callShare
}

// callShare is one namespace's share while a call of it holds or waits
// for a place in it.
type callShare struct {
	owner *callShares
	ns    string
	n     int // the share's size, as acquire was given it
	sem   *semaphore.Weighted
	users int
}

// acquire takes one of the at most n calls in flight of namespace ns,
// within ctx. Release it once.
func (s *callShares) acquire(ctx context.Context, ns string, n int) (*callShare, error) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*callShare{}
	}
	sh := s.m[ns]
	if sh == nil {
		// A spare has no user, so none holds or waits for its semaphore.
		if sh, s.spare = s.spare, nil; sh == nil || sh.n != n {
			sh = &callShare{owner: s, n: n, sem: semaphore.NewWeighted(int64(max(1, n)))}
		}
		sh.ns = ns
		s.m[ns] = sh
	}
	sh.users++
	s.mu.Unlock()
	if err := sh.sem.Acquire(ctx, 1); err != nil {
		sh.leave()
		return nil, err
	}
	return sh, nil
}

// release gives back the place acquire took; a nil share holds none.
func (sh *callShare) release() {
	if sh == nil {
		return
	}
	sh.sem.Release(1)
	sh.leave()
}

// leave ends one user's hold of sh, a place or the wait for one: the last
// ends the share, which becomes the spare if there is none.
func (sh *callShare) leave() {
	s := sh.owner
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh.users--; sh.users == 0 {
		delete(s.m, sh.ns)
		if s.spare == nil {
			s.spare = sh
		}
	}
}

// namespaceShare is how many call slots one namespace may hold.
func (g *Gateway) namespaceShare() int { return g.opts.MaxConcurrentCallsPerNamespace }

// acquireShare takes a place in the share of the namespace of ctx's
// backend within ctx (none without a backend), or says why it cannot as
// an outcome and a detail.
func (g *Gateway) acquireShare(ctx context.Context) (share *callShare, outcome, detail string) {
	b := backendFrom(ctx)
	if b == nil {
		return nil, "", ""
	}
	n := g.namespaceShare()
	share, err := g.shares.acquire(ctx, b.toolSet.Namespace, n)
	switch {
	case err == nil:
		return share, "", ""
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, outcomeBusy, fmt.Sprintf("the calls to namespace %s stayed at its share of the gateway's concurrent calls (%d of %d) for the call timeout of %s",
			b.toolSet.Namespace, n, cap(g.slots), g.opts.CallTimeout)
	}
	return nil, outcomeUnreachable, "the call was cancelled"
}
