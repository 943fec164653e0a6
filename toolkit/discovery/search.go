package discovery

import (
	"context"
	"errors"
	"strings"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ErrEmptyQuery means a search was asked without a query.
var ErrEmptyQuery = errors.New("discovery: empty search query")

// SearchOptions narrow a search. The zero value (or nil) keeps every tool
// and returns search.DefaultLimit results.
type SearchOptions struct {
	// Limit is the most results: search.DefaultLimit when zero or less, at
	// most search.MaxLimit.
	Limit int
	// Namespace, if set, keeps only tools whose ToolSet is in it.
	Namespace string
	// ToolSet, if set, keeps only tools of that ToolSet.
	ToolSet *spec.ObjectReference
	// ReadOnly and Destructive, if set, keep only tools with that
	// annotation, as search.Filter defines them.
	ReadOnly, Destructive *bool
	// Category, if set, keeps only tools of that _meta category
	// (search.CategoryMeta).
	Category string
}

// SearchResult is one tool found: its table entry and its score. Its JSON
// is the entry's with a "score" member, as the gateway's /v1/search answers.
type SearchResult struct {
	spec.TableTool
	// Score ranks the results of one search, higher first.
	Score float64 `json:"score"`
}

// Search returns the tools of the client's table that best match query, a
// task in plain words, best first (see package search for the ranking).
// The index is built on the first search of each table and reused by every
// search of it; a new table's index is updated from the last one. An empty
// query is ErrEmptyQuery; a query with no word to search by has no
// results. The caller must not modify the results' schemas.
func (c *Client) Search(ctx context.Context, query string, opts *SearchOptions) ([]SearchResult, error) {
	if strings.TrimSpace(query) == "" {
		return nil, ErrEmptyQuery
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &SearchOptions{}
	}
	s := c.snap()
	x := c.searchIndex(s)
	hits := x.Search(ctx, query, search.Filter{
		Limit:       opts.Limit,
		Namespace:   opts.Namespace,
		ToolSet:     opts.ToolSet,
		ReadOnly:    opts.ReadOnly,
		Destructive: opts.Destructive,
		Category:    opts.Category,
	})
	out := make([]SearchResult, len(hits))
	for i, h := range hits {
		out[i] = SearchResult{TableTool: s.table.Tools[h.Index], Score: h.Score}
	}
	return out, nil
}

// searchIndex returns s's index, building it once, from the client's last
// index where there is one.
func (c *Client) searchIndex(s *snapshot) *search.Index {
	s.searchOnce.Do(func() {
		if last := c.lastIndex.Load(); last != nil {
			s.index = last.Update(s.table)
		} else {
			s.index = search.New(s.table, nil)
		}
		c.lastIndex.Store(s.index)
	})
	return s.index
}
