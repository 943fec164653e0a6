package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// searchServer answers GET /v1/search with n tools, and records the
// query it was asked.
func searchServer(t *testing.T, n int) (*httptest.Server, *string) {
	t.Helper()
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.RawQuery
		var b strings.Builder
		b.WriteString(`{"revision":"sha256:x","tools":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"name":"tool_%d","sourceName":"t","inputSchema":{"type":"object"},"toolSet":{"namespace":"ns","name":"ts"},"score":%d}`, i, n-i)
		}
		b.WriteString(`],"ttlMs":10000,"cacheScope":"public"}`)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(b.String()))
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

func TestSearchURL(t *testing.T) {
	srv, asked := searchServer(t, 3)
	c := &discovery.Client{}
	ro := true
	res, err := c.SearchURL(context.Background(), srv.URL+"/v1/search", "weather in Oslo", &discovery.SearchOptions{
		Limit: 2, Namespace: "ns", ToolSet: &spec.ObjectReference{Namespace: "ns", Name: "ts"}, ReadOnly: &ro, Category: "weather"})
	if err != nil {
		t.Fatal(err)
	}
	if *asked != "category=weather&limit=2&namespace=ns&q=weather+in+Oslo&readOnly=true&toolSet=ns%2Fts" {
		t.Errorf("asked %s", *asked)
	}
	// The server sent 3; the client keeps the 2 it asked for.
	if len(res) != 2 || res[0].Name != "tool_0" || res[0].Score != 3 || res[0].ToolSet.Name != "ts" || string(res[0].InputSchema) != `{"type":"object"}` {
		t.Errorf("results %+v", res)
	}
	if _, err := c.SearchURL(context.Background(), srv.URL, "  ", nil); !errors.Is(err, discovery.ErrEmptyQuery) {
		t.Errorf("an empty query: %v", err)
	}
	// The limit asked is never over the search's own bound.
	if _, err := c.SearchURL(context.Background(), srv.URL, "x", &discovery.SearchOptions{Limit: 10_000}); err != nil || !strings.Contains(*asked, "limit=50") {
		t.Errorf("limit 10000 asked %s: %v", *asked, err)
	}
}

func TestSearchURLIsBounded(t *testing.T) {
	big, _ := searchServer(t, 20_000)
	c := &discovery.Client{MaxResponseBytes: 64 << 10}
	if _, err := c.SearchURL(context.Background(), big.URL, "x", nil); !errors.Is(err, discovery.ErrResponseTooLarge) {
		t.Errorf("a huge reply: %v", err)
	}

	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"bad_request","message":"the query is over 1024 bytes"}}`))
	}))
	defer refused.Close()
	if _, err := c.SearchURL(context.Background(), refused.URL, "x", nil); !errors.Is(err, discovery.ErrSearchRefused) || !strings.Contains(err.Error(), "over 1024 bytes") {
		t.Errorf("a refusal: %v", err)
	}

	redirect := httptest.NewServer(http.RedirectHandler(big.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	if _, err := c.SearchURL(context.Background(), redirect.URL, "x", nil); !errors.Is(err, discovery.ErrRedirect) {
		t.Errorf("a redirect: %v", err)
	}

	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hung.Close()
	defer close(release)
	slow := &discovery.Client{Timeout: 200 * time.Millisecond}
	if _, err := slow.SearchURL(context.Background(), hung.URL, "x", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a hung server: %v", err)
	}

	lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"revision":"x"}`))
	}))
	defer lying.Close()
	if _, err := c.SearchURL(context.Background(), lying.URL, "x", nil); err == nil {
		t.Error("a reply without tools was taken")
	}
}
