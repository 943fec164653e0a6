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
}

type callShare struct {
	sem   *semaphore.Weighted
	users int
}

// acquire takes one of the at most n calls in flight of namespace ns,
// within ctx.
func (s *callShares) acquire(ctx context.Context, ns string, n int) (release func(), err error) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*callShare{}
	}
	sh := s.m[ns]
	if sh == nil {
		sh = &callShare{sem: semaphore.NewWeighted(int64(max(1, n)))}
		s.m[ns] = sh
	}
	sh.users++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		if sh.users--; sh.users == 0 {
			delete(s.m, ns)
		}
		s.mu.Unlock()
	}
	if err := sh.sem.Acquire(ctx, 1); err != nil {
		done()
		return nil, err
	}
	return func() { sh.sem.Release(1); done() }, nil
}

// namespaceShare is how many call slots one namespace may hold.
func (g *Gateway) namespaceShare() int { return g.opts.MaxConcurrentCallsPerNamespace }

// acquireShare takes a place in the share of the namespace of ctx's
// backend within ctx, or says why it cannot as an outcome and a detail.
func (g *Gateway) acquireShare(ctx context.Context) (release func(), outcome, detail string) {
	b := backendFrom(ctx)
	if b == nil {
		return func() {}, "", ""
	}
	n := g.namespaceShare()
	release, err := g.shares.acquire(ctx, b.toolSet.Namespace, n)
	switch {
	case err == nil:
		return release, "", ""
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, outcomeBusy, fmt.Sprintf("the calls to namespace %s stayed at its share of the gateway's concurrent calls (%d of %d) for the call timeout of %s",
			b.toolSet.Namespace, n, cap(g.slots), g.opts.CallTimeout)
	}
	return nil, outcomeUnreachable, "the call was cancelled"
}
