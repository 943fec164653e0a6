// Package embedding turns text into vectors for the semantic stage of
// package search, through any OpenAI-compatible embeddings endpoint: what
// vLLM, Hugging Face TEI, Ollama and LocalAI serve in a cluster. It only
// calls the endpoint; it never fetches a model.
package embedding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// Defaults of an [OpenAI]'s zero fields.
const (
	// DefaultBatch is the most texts sent in one request.
	DefaultBatch = 64
	// DefaultTimeout bounds one request.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxResponseBytes bounds one reply.
	DefaultMaxResponseBytes = 32 << 20
	// MaxDimensions bounds the length of one vector.
	MaxDimensions = 8192
)

// ErrBadResponse means the endpoint's reply is not a usable embeddings
// response: not JSON, the wrong number of vectors, vectors of different or
// absurd lengths, or values that are not finite.
var ErrBadResponse = errors.New("embedding: bad response")

// OpenAI embeds texts with POST {URL}/v1/embeddings, the OpenAI embeddings
// API, which it implements as a [search.Embedder]. Its zero value needs a
// URL; set its fields before first use.
type OpenAI struct {
	// URL is the endpoint's base URL, such as http://tei.ml.svc:8080; the
	// request goes to URL + "/v1/embeddings". A URL already ending in
	// /embeddings is used as it is.
	URL string
	// Model is sent as "model"; servers that serve one model ignore it.
	Model string
	// APIKey, if set, is sent as a bearer token.
	APIKey string
	// HTTPClient makes the requests; nil means a client that follows no
	// redirect (so that the key goes only to URL).
	HTTPClient *http.Client
	// Batch is the most texts in one request; zero means DefaultBatch.
	Batch int
	// Timeout bounds each request on top of the context's deadline; zero
	// means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds each reply's body; zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type request struct {
	Input []string `json:"input"`
	Model string   `json:"model,omitempty"`
	// EncodingFormat asks for plain floats, which every server supports.
	EncodingFormat string `json:"encoding_format"`
}

type response struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one vector per text, in order, normalized to unit length so
// that a dot product is their cosine similarity.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := o.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	out := make([][]float32, 0, len(texts))
	dim := 0
	for start := 0; start < len(texts); start += batch {
		vecs, err := o.embedBatch(ctx, texts[start:min(len(texts), start+batch)])
		if err != nil {
			return nil, err
		}
		for _, v := range vecs {
			if dim == 0 {
				dim = len(v)
			}
			if len(v) != dim {
				return nil, fmt.Errorf("%w: vectors of %d and %d dimensions", ErrBadResponse, dim, len(v))
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func (o *OpenAI) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(request{Input: texts, Model: o.Model, EncodingFormat: "float"})
	if err != nil {
		return nil, err
	}
	url := strings.TrimRight(o.URL, "/")
	if !strings.HasSuffix(url, "/embeddings") {
		url += "/v1/embeddings"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embedding: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = noRedirects
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embedding: %w", err)
	}
	defer resp.Body.Close()
	limit := o.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("embedding: reading the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("embedding: %s answered %d", url, resp.StatusCode)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: reply larger than %d bytes", ErrBadResponse, limit)
	}
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if len(r.Data) != len(texts) {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrBadResponse, len(r.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("%w: index %d", ErrBadResponse, d.Index)
		}
		v := d.Embedding
		if len(v) == 0 || len(v) > MaxDimensions {
			return nil, fmt.Errorf("%w: a vector of %d dimensions", ErrBadResponse, len(v))
		}
		if !normalize(v) {
			return nil, fmt.Errorf("%w: a zero or non-finite vector", ErrBadResponse)
		}
		out[d.Index] = v
	}
	return out, nil
}

// normalize scales v to unit length in place; it reports false for a zero
// vector or one with values that are not finite.
func normalize(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return false
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
	return true
}
