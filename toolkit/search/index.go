package search

import (
	"context"
	"math"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Limits of [Filter].Limit.
const (
	// DefaultLimit is the number of hits when Filter.Limit is zero or less.
	DefaultLimit = 10
	// MaxLimit caps Filter.Limit.
	MaxLimit = 50
)

// Filter narrows a search. Its zero value keeps every tool and returns
// DefaultLimit hits.
type Filter struct {
	// Limit is the most hits returned: DefaultLimit when zero or less, at
	// most MaxLimit.
	Limit int
	// Namespace, if set, keeps only tools whose ToolSet is in it.
	Namespace string
	// ToolSet, if set, keeps only tools of that ToolSet.
	ToolSet *spec.ObjectReference
	// ReadOnly, if set, keeps only tools whose annotations.readOnlyHint is
	// that value; an absent hint is false, as MCP defines it.
	ReadOnly *bool
	// Destructive, if set, keeps only tools that are (or are not)
	// destructive as MCP defines it: a read-only tool is not, and any other
	// is unless its destructiveHint is false.
	Destructive *bool
	// Category, if set, keeps only tools whose _meta CategoryMeta is that
	// string, compared without regard to case.
	Category string
	// Allow, if set, is asked about each candidate that passed the other
	// filters, best first, until Limit are allowed: the caller's own rule,
	// such as the gateway's permissions. i indexes the table's Tools. It is
	// never called for a tool that could not be a hit.
	Allow func(i int) bool
}

// Hit is one search result.
type Hit struct {
	// Index is the tool's index in the Tools of the table the index was
	// built from.
	Index int
	// Score ranks hits, higher first. Scores are comparable within one
	// search only.
	Score float64
}

// Options configure an index. The zero value (or nil) is lexical ranking
// only.
type Options struct {
	// Embedder, if set, adds a semantic stage: the query's embedding is
	// compared with the tools', and that ranking is fused with the lexical
	// one by reciprocal rank fusion. Tool vectors are computed by
	// [Index.Embed], not by New; until they are, and whenever the query
	// cannot be embedded within EmbedTimeout, searches are lexical.
	Embedder Embedder
	// EmbedTimeout bounds embedding one query; zero means
	// DefaultEmbedTimeout.
	EmbedTimeout time.Duration
}

// DefaultEmbedTimeout bounds embedding one query when
// Options.EmbedTimeout is zero: an embedding endpoint slower than this adds
// nothing to a search but its wait.
const DefaultEmbedTimeout = 250 * time.Millisecond

// Embedder turns texts into vectors, one per text, in order, all of one
// dimension. [OpenAIEmbedder] is one for any OpenAI-compatible
// /v1/embeddings endpoint.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedderFunc adapts a function to [Embedder].
type EmbedderFunc func(ctx context.Context, texts []string) ([][]float32, error)

// Embed calls f.
func (f EmbedderFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

// BM25F parameters. Weights favour the words a tool is named and titled
// by; b is the strength of length normalization per field (names and
// titles are short and similar in length, descriptions vary).
var (
	fieldWeight = [numFields]float32{fieldName: 3, fieldTitle: 0.1, fieldDesc: 1, fieldParamName: 0.1, fieldParamDesc: 0.6, fieldTags: 0.5, fieldOwner: 6, fieldExact: 1}
	fieldB      = [numFields]float32{fieldName: 1, fieldTitle: 0.3, fieldDesc: 0.6, fieldParamName: 0.75, fieldParamDesc: 0.9, fieldTags: 0.3, fieldOwner: 0, fieldExact: 0.9}
)

var bm25K1 float32 = 1.2

// idf is BM25's inverse document frequency of a term in df of n documents.
// An index's df counts dead postings too, so it is capped at n, which keeps
// idf positive.
func idf(n, df int) float32 {
	df = min(df, n)
	return float32(math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5)))
}
