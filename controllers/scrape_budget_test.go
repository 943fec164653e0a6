package controllers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestScrapeBudgetBoundsConcurrentReaders(t *testing.T) {
	const size = 4 << 20
	b := newScrapeBudget(size)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	// Each reader holds what it was charged until every reader has read.
	var read sync.WaitGroup
	read.Add(32)
	for range 32 {
		wg.Go(func() {
			// A reader that waits for its first share gives up at its
			// timeout, as a scrape does.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			c := b.charge(ctx)
			defer func() {
				read.Wait()
				held.Add(-c.holding())
				c.release()
			}()
			defer read.Done()
			for range 64 {
				before := c.holding()
				err := c.add(16 << 10)
				now := held.Add(c.holding() - before)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				if err != nil {
					if !errors.Is(err, errScrapeBudget) {
						t.Errorf("got %v, want errScrapeBudget", err)
					}
					refused.Add(1)
					return
				}
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	if p := peak.Load(); p > size {
		t.Fatalf("the readers held %d bytes at once, more than the budget of %d", p, size)
	}
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("%d readers charged 1 MiB and %d refused, want some of each within a 4 MiB budget", ok.Load(), refused.Load())
	}
	// Released, the whole budget is there again.
	if c := b.charge(context.Background()); c.add(size) != nil {
		t.Fatal("the budget was not whole again once every reader released")
	}
	t.Logf("%d readers charged 1 MiB, %d refused", ok.Load(), refused.Load())
}

func TestScrapeBudgetChargesAnOrdinaryScrapeItsFirstReservation(t *testing.T) {
	b := newScrapeBudget(1 << 20)
	c := b.charge(context.Background())
	defer c.release()
	for range 10 {
		if err := c.add(1 << 10); err != nil {
			t.Fatal(err)
		}
	}
	if h := c.holding(); h != firstScrapeCharge {
		t.Fatalf("10 KiB charged held %d bytes, want one first reservation of %d", h, firstScrapeCharge)
	}
	// Growing, a charge holds at most about twice what it was charged.
	if err := c.add(300 << 10); err != nil {
		t.Fatal(err)
	}
	if h := c.holding(); h > 2*(310<<10) {
		t.Fatalf("310 KiB charged held %d bytes", h)
	}
}

func TestScrapeBudgetWaiterProceedsWhenAnotherReleases(t *testing.T) {
	b := newScrapeBudget(1 << 20)
	full := b.charge(context.Background())
	if err := full.add(1 << 20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waiter := b.charge(ctx)
	defer waiter.release()
	done := make(chan error, 1)
	go func() { done <- waiter.add(1 << 10) }()
	select {
	case err := <-done:
		t.Fatalf("a reader was charged while the budget was spent: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	full.release()
	if err := <-done; err != nil {
		t.Fatalf("the waiting reader, once the budget was released: %v", err)
	}
}

func TestScrapeBudgetWaiterGivesUpWhenItsContextEnds(t *testing.T) {
	b := newScrapeBudget(1 << 20)
	full := b.charge(context.Background())
	defer full.release()
	if err := full.add(1 << 20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c := b.charge(ctx)
	defer c.release()
	if err := c.add(1); !errors.Is(err, errScrapeBudget) {
		t.Fatalf("got %v, want errScrapeBudget once the context ended", err)
	}
	// A charge held in part fails at once rather than wait on the others.
	part := newScrapeBudget(1 << 20)
	a, other := part.charge(context.Background()), part.charge(context.Background())
	defer a.release()
	defer other.release()
	if err := a.add(firstScrapeCharge); err != nil {
		t.Fatal(err)
	}
	if err := other.add(1<<20 - firstScrapeCharge); err != nil {
		t.Fatal(err)
	}
	if err := a.add(1); !errors.Is(err, errScrapeBudget) {
		t.Fatalf("growing into a spent budget: got %v", err)
	}
	if err := newScrapeBudget(1 << 20).charge(context.Background()).add(2 << 20); !errors.Is(err, errScrapeBudget) {
		t.Fatalf("a charge larger than the budget: got %v", err)
	}
}

// TestScrapeFailsWhenTheBudgetIsSpent scrapes a spec document and an MCP
// server while other scrapes hold the whole budget: each waits within its
// timeout and fails with a stable reason; with the budget back, each passes.
func TestScrapeFailsWhenTheBudgetIsSpent(t *testing.T) {
	body := encodeDoc(t, tool("a"))
	doc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(doc.Close)
	s := mcp.NewServer(&mcp.Implementation{Name: "ok"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "a", Description: "A."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(mcpSrv.Close)

	scrapes := map[string]func(*scraper, time.Duration) error{
		"a spec document": func(sc *scraper, timeout time.Duration) error {
			docTarget := scrapeTarget{spec: &v1alpha1.ToolSetSpec{Path: spec.DefaultPath, Scheme: "http"}, timeout: timeout}
			c := docTarget.httpClient()
			defer c.CloseIdleConnections()
			_, err := sc.fetch(context.Background(), c, docTarget, doc.URL+spec.DefaultPath, nil)
			return err
		},
		"an MCP server": func(sc *scraper, timeout time.Duration) error {
			_, err := listMCPOnce(sc, mcpTarget(0, timeout), mcpSrv.URL, nil)
			return err
		},
	}
	for name, scrape := range scrapes {
		t.Run(name, func(t *testing.T) {
			sc := newScraper(1, 0)
			sc.budget = newScrapeBudget(1 << 20)
			others := sc.budget.charge(context.Background())
			if err := others.add(1 << 20); err != nil {
				t.Fatal(err)
			}
			err := scrape(sc, 200*time.Millisecond)
			if scrapeReason(err) != scrapeErrBudget || !errors.Is(err, errScrapeBudget) {
				t.Fatalf("got %v (reason %s), want the budget's refusal", err, scrapeReason(err))
			}
			// The status message names the flag, and is the same on every
			// round: no size held, no local address.
			again := scrape(sc, 200*time.Millisecond)
			if msg := stableError(err); !strings.Contains(msg, "--scrape-memory-budget") || msg != stableError(again) {
				t.Fatalf("status messages %q and %q", msg, stableError(again))
			}
			others.release()
			if err := scrape(sc, 10*time.Second); err != nil {
				t.Fatalf("with the budget released: %v", err)
			}
		})
	}
}
