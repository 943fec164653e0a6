package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// DefaultScrapeMemoryBudget bounds the memory that the scrapes in flight
// hold together (--scrape-memory-budget). With a small install's baseline
// (40–60 MiB) and the garbage collector's slack it keeps the manager within
// its chart limit (256 Mi) less 20%, whatever every namespace serves at
// once.
const DefaultScrapeMemoryBudget int64 = 64 << 20

// scrapeCostFactor is what a scrape charges per byte it reads, besides what
// the bytes decode to: the body, and its copy, the parsed document or the
// re-encoding of an MCP server's tools.
const scrapeCostFactor = 2

// firstScrapeCharge is the first reservation of a scrape: an ordinary spec
// document or tools/list page (kilobytes, some 16 times that decoded) fits
// in it, and takes nothing more from the budget.
const firstScrapeCharge = 256 << 10

// errScrapeBudget is a scrape refused because the scrapes in flight hold
// the whole memory budget. Its text is stable: no size, no address.
var errScrapeBudget = errors.New("the scrapes in flight hold the manager's memory budget (--scrape-memory-budget)")

// scrapeErrBudget is the metric reason of a scrape refused by the budget.
const scrapeErrBudget = "memory_budget"

// scrapeBudget bounds the bytes that the scrapes in flight hold together:
// what they read, and what it will decode to, charged as they read it (see
// [scrapeCharge]). It is the manager-wide bound in bytes that the scrape
// slots, which are counts, are not: 32 slots of pages just under the decode
// budget would be 32 × ~16 MiB.
//
// As the gateway's budgets, a scrape waits for its first reservation
// (within its timeout) and takes the rest without waiting or fails, so
// that scrapes that each hold part of the budget never wait on each other
// until they all time out; and a scrape holds at most about twice what it
// has been charged, never a declared length ahead of the bytes.
type scrapeBudget struct {
	sem  *semaphore.Weighted
	size int64
}

func newScrapeBudget(size int64) *scrapeBudget {
	if size <= 0 {
		size = DefaultScrapeMemoryBudget
	}
	return &scrapeBudget{sem: semaphore.NewWeighted(size), size: size}
}

// charge starts what one scrape holds of the budget; ctx bounds the wait for
// its first reservation (the scrape's timeout). Release it when the
// scrape's result is assembled or dropped.
func (b *scrapeBudget) charge(ctx context.Context) *scrapeCharge {
	return &scrapeCharge{b: b, ctx: ctx}
}

// scrapeCharge is what one scrape holds of the budget. It is safe for
// concurrent use: the bodies of an MCP scrape's exchanges charge it at once.
type scrapeCharge struct {
	b   *scrapeBudget
	ctx context.Context

	mu         sync.Mutex
	held, used int64
	released   bool
	// starved says the scrape waited for the budget and did not get it, or
	// waits now: a scrape that ends while it waits failed for the budget,
	// whichever of its reads and its context tells first.
	starved atomic.Bool
}

// add charges n more bytes, reserving more of the budget when what is held
// does not cover them: the first reservation waits within the scrape's
// context, later ones (twice what is held, up to the budget) fail at once
// when the budget is spent.
func (c *scrapeCharge) add(n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return errScrapeBudget
	}
	c.used += n
	if c.used <= c.held {
		return nil
	}
	more := min(max(c.used-c.held, c.held, firstScrapeCharge), c.b.size-c.held)
	if c.used > c.held+more {
		// More than the whole budget: no wait gives it.
		return errScrapeBudget
	}
	if c.held == 0 {
		c.starved.Store(true)
		if err := c.b.sem.Acquire(c.ctx, more); err != nil {
			return fmt.Errorf("%w: waited until the scrape's timeout", errScrapeBudget)
		}
		c.starved.Store(false)
	} else if !c.b.sem.TryAcquire(more) {
		c.starved.Store(true)
		return errScrapeBudget
	}
	c.held += more
	return nil
}

// release returns what the scrape holds; later charges fail.
func (c *scrapeCharge) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		c.b.sem.Release(c.held)
	}
	c.held, c.released = 0, true
}

// holding reports what the scrape holds of the budget.
func (c *scrapeCharge) holding() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// maxChargedRead bounds one read of a scrape's body, which is charged once
// it has been read: a read holds at most this much uncharged.
const maxChargedRead = 32 << 10

// chargedReader charges each read of r, and what the bytes decode to as
// meter estimates it, to a scrape's charge. A read the budget refuses
// fails with errScrapeBudget; one past the scrape's own decodeLimit fails
// with errDecodeLimit first, before it charges the budget more.
type chargedReader struct {
	r           io.Reader
	charge      *scrapeCharge
	meter       *spec.DecodeMeter
	decodeLimit int64
}

// errDecodeLimit is a read whose bytes would decode to more than the
// scrape's decode budget.
var errDecodeLimit = errors.New("decode budget exceeded")

func (c *chargedReader) Read(p []byte) (int, error) {
	if len(p) > maxChargedRead {
		p = p[:maxChargedRead]
	}
	n, err := c.r.Read(p)
	before := c.meter.Cost()
	_, _ = c.meter.Write(p[:n])
	if c.decodeLimit > 0 && c.meter.Cost() > c.decodeLimit {
		return 0, errDecodeLimit
	}
	if cerr := c.charge.add(scrapeCostFactor*int64(n) + c.meter.Cost() - before); cerr != nil {
		return 0, cerr
	}
	return n, err
}
