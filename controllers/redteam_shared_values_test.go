package controllers

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Red-team: a hostile MCP workload makes toolValues hold about six times
// its stated bound of 4 MiB (maxSharedBytes).
//
// sharedValues counts a kept string as len(v) bytes. On the MCP path the
// strings come from the Go SDK, which decodes with segmentio/encoding/json.
// For a JSON string that contains escapes, that decoder unquotes into a new
// buffer made with the capacity of the *escaped* text
// (parseStringUnquote: make([]byte, 0, len(s))) and hands out a string that
// points into it without copying (decodeString: the `new` case). A title or
// description written as "\u0041\u0041..." is 16 KiB long (so it passes
// maxSharedLen and is counted as 16 KiB), but it pins a 96 KiB allocation.
// fromMCPTool passes these strings through unchanged, and share keeps them
// (before any --max-tool-*-bytes bound is applied). A tenant that serves
// ever new such values fills toolValues to its 4 MiB accounting while it
// retains ~24 MiB, for as long as no newer values push them out, after the
// documents that brought them are gone.
//
// The test serves 2 tools/list replies of fresh escaped values through
// listMCP, drops every document, and measures what toolValues alone keeps
// alive (the heap before and after replacing it).
func TestRedTeamSharedValuesEscapedMCPStringsPastTheByteBound(t *testing.T) {
	// A bound of 1 MiB rather than maxSharedBytes, so that two replies
	// pass it: the race detector makes each reply seconds.
	const bound = 1 << 20
	saved := toolValues
	toolValues = newSharedValues(maxSharedLen, bound, maxSharedValues)
	defer func() { toolValues = saved }()

	var serial atomic.Int64
	escaped := func(prefix string) string {
		// 16 KiB once unescaped: exactly maxSharedLen, so it is kept.
		p := fmt.Sprintf("%s%07d-", prefix, serial.Add(1))
		return p + strings.Repeat(`\u0041`, maxSharedLen-len(p))
	}
	const toolsPerReply = 13 // ~3.8 MiB a reply, under --max-response-bytes 4 MiB
	srv := rawMCPServer(t, "2025-06-18", "esc", func(w http.ResponseWriter, id json.RawMessage) {
		var b strings.Builder
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[`, id)
		for i := range toolsPerReply {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"t%d","title":"%s","description":"%s","inputSchema":{"type":"object"},"annotations":{"title":"%s"}}`,
				i, escaped("T"), escaped("D"), escaped("A"))
		}
		b.WriteString(`]}}`)
		_, _ = io.WriteString(w, b.String())
	})

	s := newScraper(1, 4<<20)
	tgt := mcpTarget(100, 30*time.Second)
	for round := range 2 {
		doc, err := listMCPOnce(s, tgt, srv.URL+"/mcp", nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(doc.Tools) != toolsPerReply || len(doc.Tools[0].Description) != maxSharedLen {
			t.Fatalf("round %d: %d tools, description %d bytes", round, len(doc.Tools), len(doc.Tools[0].Description))
		}
	}

	toolValues.mu.Lock()
	counted, kept := toolValues.kept.bytes, toolValues.kept.len()
	toolValues.mu.Unlock()

	heap := func() uint64 {
		var m runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	with := heap()
	toolValues = newSharedValues(maxSharedLen, bound, maxSharedValues)
	without := heap()
	retained := int64(with) - int64(without)
	t.Logf("toolValues counts %d values, %d bytes (bound %d); it keeps %d bytes of heap alive", kept, counted, bound, retained)
	if counted < bound*3/4 {
		t.Fatalf("the replies filled %d bytes of the %d bound: the attack did not reach it", counted, bound)
	}
	// Generous: twice the stated bound, for the maps and the order.
	if retained > 2*bound {
		t.Errorf("toolValues keeps %.1f MiB alive, past its bound of %d MiB (counted %.1f MiB): escaped strings from the MCP SDK pin their escaped buffers",
			float64(retained)/(1<<20), bound>>20, float64(counted)/(1<<20))
	}
}
