package embedding_test

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/search/embedding"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// concepts is the test model's whole knowledge: words that mean the same
// thing share a concept, so texts about a refund and about money back land
// near each other although they share no word.
var concepts = map[string]string{
	"refund": "money-back", "money": "money-back", "back": "money-back", "reimburse": "money-back", "repay": "money-back",
	"customer": "person", "client": "person", "buyer": "person",
	"ticket": "issue", "issue": "issue", "bug": "issue",
	"screenshot": "picture", "capture": "picture", "image": "picture",
}

const dims = 64

// embed is a small deterministic embedding: each word's concept (or the
// word) hashed into one of dims dimensions.
func embed(text string) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
		if c, ok := concepts[w]; ok {
			w = c
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%dims]++
	}
	return v
}

// server serves /v1/embeddings with embed, as TEI or vLLM would, and counts
// the texts it embedded.
type server struct {
	*httptest.Server
	texts    atomic.Int64
	requests atomic.Int64
	delay    atomic.Int64 // nanoseconds before answering
	mu       sync.Mutex
	inputs   []string
	auth     atomic.Value
}

func newServer(t *testing.T) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		s.requests.Add(1)
		s.auth.Store(r.Header.Get("Authorization"))
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// A hung endpoint, which notices the client hanging up: the body
		// is read, so the server watches the connection.
		if d := time.Duration(s.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		type datum struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		resp := struct {
			Object string  `json:"object"`
			Data   []datum `json:"data"`
			Model  string  `json:"model"`
		}{Object: "list", Model: req.Model}
		// Answer in reverse order: clients must place vectors by index.
		for i := len(req.Input) - 1; i >= 0; i-- {
			resp.Data = append(resp.Data, datum{Object: "embedding", Index: i, Embedding: embed(req.Input[i])})
		}
		s.texts.Add(int64(len(req.Input)))
		s.mu.Lock()
		s.inputs = append(s.inputs, req.Input...)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(s.Close)
	return s
}

func tools() *spec.Table {
	mk := func(name, desc string) spec.TableTool {
		return spec.TableTool{Name: name, SourceName: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet: spec.ObjectReference{Namespace: "shop", Name: "shop"}}
	}
	ts := []spec.TableTool{
		mk("billing_refund", "Refund a payment."),
		mk("crm_lookup", "Look up a customer by e-mail."),
		mk("tracker_open", "Open a ticket."),
		mk("browser_screenshot", "Capture the page as an image."),
		mk("orders_list", "List the orders of a person."),
	}
	spec.SortTableTools(ts)
	return &spec.Table{Revision: spec.TableRevision(ts), Tools: ts}
}

func TestOpenAIEmbeds(t *testing.T) {
	s := newServer(t)
	o := &embedding.OpenAI{URL: s.URL, Model: "test", APIKey: "k", Batch: 2}
	vecs, err := o.Embed(t.Context(), []string{"refund", "money back", "ticket"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || len(vecs[0]) != dims || s.texts.Load() != 3 || s.auth.Load() != "Bearer k" {
		t.Fatalf("%d vectors, %d texts sent, auth %v", len(vecs), s.texts.Load(), s.auth.Load())
	}
	var n float32
	for _, x := range vecs[0] {
		n += x * x
	}
	if n < 0.999 || n > 1.001 {
		t.Fatalf("vector not of unit length: %v", n)
	}
	// Order kept although the server answered in reverse.
	if dot(vecs[0], vecs[1]) < 0.9 || dot(vecs[0], vecs[2]) > 0.1 {
		t.Fatalf("vectors out of order: %v %v", dot(vecs[0], vecs[1]), dot(vecs[0], vecs[2]))
	}
}

func TestOpenAIRefusesBadReplies(t *testing.T) {
	for name, body := range map[string]string{
		"not json":      `{"data":`,
		"too few":       `{"data":[]}`,
		"zero vector":   `{"data":[{"index":0,"embedding":[0,0]}]}`,
		"bad index":     `{"data":[{"index":7,"embedding":[1,0]}]}`,
		"no dimensions": `{"data":[{"index":0,"embedding":[]}]}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }))
		_, err := (&embedding.OpenAI{URL: srv.URL}).Embed(t.Context(), []string{"x"})
		srv.Close()
		if !errors.Is(err, embedding.ErrBadResponse) {
			t.Errorf("%s: %v", name, err)
		}
	}
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[` + strings.Repeat("1,", 1000) + `1]}]}`))
	}))
	defer big.Close()
	if _, err := (&embedding.OpenAI{URL: big.URL, MaxResponseBytes: 100}).Embed(t.Context(), []string{"x"}); !errors.Is(err, embedding.ErrBadResponse) {
		t.Errorf("oversized reply: %v", err)
	}
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/v1/embeddings", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	if _, err := (&embedding.OpenAI{URL: redirect.URL, APIKey: "secret"}).Embed(t.Context(), []string{"x"}); err == nil {
		t.Errorf("a redirect was followed")
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func names(tb *spec.Table, hits []search.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, tb.Tools[h.Index].Name)
	}
	return out
}

func TestSemanticStageFindsWhatWordsMiss(t *testing.T) {
	s := newServer(t)
	tb := tools()
	x := search.New(tb, &search.Options{Embedder: &embedding.OpenAI{URL: s.URL}})
	q := "give the buyer their money back"

	// Before Embed, searches are lexical and call no endpoint.
	if got := names(tb, x.Search(t.Context(), q, search.Filter{})); len(got) != 0 && got[0] == "billing_refund" {
		t.Fatalf("lexical search already finds it, the test proves nothing: %v", got)
	}
	if s.texts.Load() != 0 {
		t.Fatalf("New or Search embedded %d texts", s.texts.Load())
	}
	if err := x.Embed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := names(tb, x.Search(t.Context(), q, search.Filter{})); len(got) == 0 || got[0] != "billing_refund" {
		t.Fatalf("semantic stage: %v", got)
	}
	// Filters hold in the semantic ranking too.
	for _, h := range x.Search(t.Context(), q, search.Filter{Allow: func(i int) bool { return tb.Tools[i].Name != "billing_refund" }}) {
		if tb.Tools[h.Index].Name == "billing_refund" {
			t.Fatalf("Allow ignored by the semantic stage")
		}
	}

	// A new revision embeds only its new tool.
	before := s.texts.Load()
	ts := append([]spec.TableTool{}, tb.Tools...)
	ts = append(ts, spec.TableTool{Name: "shop_reimburse", SourceName: "reimburse", Description: "Repay an order.", InputSchema: json.RawMessage(`{}`),
		ToolSet: spec.ObjectReference{Namespace: "shop", Name: "shop"}})
	spec.SortTableTools(ts)
	tb2 := &spec.Table{Revision: spec.TableRevision(ts), Tools: ts}
	y := x.Update(tb2)
	if err := y.Embed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := s.texts.Load() - before; n != 1 {
		t.Fatalf("the update embedded %d texts, want 1", n)
	}
	if got := names(tb2, y.Search(t.Context(), "repay an order", search.Filter{})); len(got) == 0 || got[0] != "shop_reimburse" {
		t.Fatalf("new tool: %v", got)
	}
}

func TestSemanticStageIsNeverWaitedOnWhenTheEndpointIsDown(t *testing.T) {
	s := newServer(t)
	tb := tools()
	x := search.New(tb, &search.Options{Embedder: &embedding.OpenAI{URL: s.URL}, EmbedTimeout: 50 * time.Millisecond})
	if err := x.Embed(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The endpoint hangs now: the first search waits at most the timeout
	// and answers lexically; the next ones do not wait at all.
	s.delay.Store(int64(time.Hour))
	sent := s.texts.Load()
	start := time.Now()
	got := names(tb, x.Search(context.Background(), "refund a payment", search.Filter{}))
	if len(got) == 0 || got[0] != "billing_refund" {
		t.Fatalf("lexical answer: %v", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the first search waited %s", d)
	}
	requests := s.requests.Load()
	for range 20 {
		if got := names(tb, x.Search(context.Background(), "open a ticket for this bug", search.Filter{})); len(got) == 0 || got[0] != "tracker_open" {
			t.Fatalf("lexical answer while backing off: %v", got)
		}
	}
	if n := s.requests.Load() - requests; n != 0 || s.texts.Load() != sent {
		t.Fatalf("%d requests sent to an endpoint that is down, within its backoff", n)
	}
}
