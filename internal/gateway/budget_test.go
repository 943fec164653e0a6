package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestBudgetReadsWithinItsSize(t *testing.T) {
	ctx := context.Background()
	b := newBudget(1<<20, 16<<10)

	// A read of unknown length grows its reservation as it reads.
	data, held, err := b.read(ctx, strings.NewReader(strings.Repeat("x", 300<<10)), -1, 512<<10)
	if err != nil || len(data) != 300<<10 || held < int64(len(data)) || held > 1<<20 {
		t.Fatalf("read %d bytes holding %d: %v", len(data), held, err)
	}
	// One past the limit is read, so that the caller sees it is over.
	over, overHeld, err := b.read(ctx, strings.NewReader(strings.Repeat("x", 600<<10)), -1, 100<<10)
	if err != nil || len(over) != 100<<10+1 {
		t.Fatalf("a reader over the limit: %d bytes, %v", len(over), err)
	}
	b.release(overHeld)

	// What is left is not enough for a reply that grows past it: it fails
	// at once rather than wait for the other read to end.
	start := time.Now()
	_, failedHeld, err := b.read(ctx, bytes.NewReader(make([]byte, 900<<10)), -1, 1<<20)
	if !errors.Is(err, errBudget) || time.Since(start) > time.Second {
		t.Fatalf("a read past what is left: %v after %s", err, time.Since(start))
	}
	b.release(failedHeld)

	// A read waits for its first chunk, within its context.
	b.release(held)
	if !b.sem.TryAcquire(1 << 20) {
		t.Fatal("the budget was not whole again after every release")
	}
	c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, _, err := b.read(c, strings.NewReader("{}"), 2, 1<<20); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read that waits past its context: %v", err)
	}
	b.release(1 << 20)
	// A short declared length is reserved whole; a long one is not
	// reserved ahead of its bytes.
	data, held, err = b.read(ctx, strings.NewReader("{}"), 2, 1<<20)
	if err != nil || string(data) != "{}" || held != 3 {
		t.Fatalf("read %q holding %d: %v", data, held, err)
	}
	b.release(held)
	slow := &slowReader{}
	data, held, err = b.read(ctx, slow, 1<<20-1, 1<<20)
	if err != nil || len(data) != 10 || held != 16<<10 {
		t.Fatalf("a body that declares 1 MiB and sends 10 bytes: read %d holding %d: %v", len(data), held, err)
	}
	b.release(held)
}

// slowReader sends one byte per Read, ten in all.
type slowReader struct{ n int }

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n == 10 {
		return 0, io.EOF
	}
	r.n++
	p[0] = 'x'
	return 1, nil
}

func TestMCPSourceResultsAreChargedToTheBudget(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	big := strings.Repeat("x", 100<<10)
	mcp.AddTool(srv, &mcp.Tool{Name: "big", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	g := New(&Options{MaxResultBytes: 1 << 20, MaxResultMemory: 1 << 20})
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, outcome, detail := g.mcpRoundTrip(ctx, hs.URL, "big", nil, http.Header{}, http.Header{})
	if res == nil || outcome != outcomeOK {
		t.Fatalf("with the budget free: %s, %s", outcome, detail)
	}
	if !g.results.sem.TryAcquire(1 << 20) {
		t.Fatal("the call kept part of the budget after it returned")
	}
	// All but 32 KiB spent by other calls: the 100 KiB reply outgrows it.
	g.results.sem.Release(32 << 10)
	res, outcome, detail = g.mcpRoundTrip(ctx, hs.URL, "big", nil, http.Header{}, http.Header{})
	if res != nil || outcome != outcomeBusy || !strings.Contains(detail, "budget") {
		t.Fatalf("with 32 KiB of the budget left: %v, %s, %s", res != nil, outcome, detail)
	}
}
