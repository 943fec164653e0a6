package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
	toolsearch "github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/search/embedding"
)

// conceptEmbeddings is an OpenAI-compatible /v1/embeddings endpoint whose
// vectors have one dimension per concept, set when the text has one of
// the concept's words: "zorbleflux", a word no lexical index knows, means
// the weather.
func conceptEmbeddings(t *testing.T) *httptest.Server {
	t.Helper()
	concepts := [][]string{{"weather", "forecast", "rain", "zorbleflux"}, {"customer", "crm"}, {"refund", "order", "card"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []datum `json:"data"`
		}
		for i, text := range req.Input {
			v := make([]float32, len(concepts)+1)
			v[len(concepts)] = 0.01
			for d, words := range concepts {
				for _, word := range words {
					if strings.Contains(strings.ToLower(text), word) {
						v[d] = 1
					}
				}
			}
			out.Data = append(out.Data, datum{Index: i, Embedding: v})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSemanticSearchIsOffTheRequestPath(t *testing.T) {
	emb := conceptEmbeddings(t)
	f := newSearchFixture(t, gateway.Options{Search: &toolsearch.Options{Embedder: &embedding.OpenAI{URL: emb.URL}}})
	// Once the tools are embedded, a word only the embeddings know finds
	// the weather tool.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := search(t, f.url, "q=zorbleflux", "").names(t); len(n) > 0 && n[0] == "weather_forecast" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the semantic stage never found the weather tool by its concept")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Lexical matches are still found, fused with the semantic ranks.
	if n := search(t, f.url, "q=refund+an+order", "").names(t); !slices.Contains(n, "crm_refund_order") {
		t.Errorf("with the semantic stage, refund an order found %v", n)
	}

	// An endpoint that is down leaves search lexical, and answering.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	g := newSearchFixture(t, gateway.Options{Search: &toolsearch.Options{Embedder: &embedding.OpenAI{URL: dead.URL}, EmbedTimeout: 100 * time.Millisecond}})
	if n := search(t, g.url, "q=weather+forecast", "").names(t); !slices.Contains(n, "weather_forecast") {
		t.Errorf("with the embeddings endpoint down, weather forecast found %v", n)
	}
	if n := search(t, g.url, "q=zorbleflux", "").names(t); len(n) != 0 {
		t.Errorf("without embeddings, zorbleflux found %v", n)
	}
}
