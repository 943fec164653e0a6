package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ErrSearchRefused means the search endpoint refused the search as asked
// (400): a query over its bound, a limit or a ToolSet it cannot read. The
// error carries the server's message.
var ErrSearchRefused = errors.New("discovery: search refused")

// SearchURL asks the search endpoint at url, such as the toolplane
// gateway's GET /v1/search, for the tools that best match query, and
// returns them best first, as [Client.Search] returns the tools of the
// table the client holds. The gateway ranks the tools of every table
// entry and, when it authenticates callers, returns only the tools the
// caller may call: give its bearer token through TableHTTPClient, never
// through HTTPClient, which calls workloads.
//
// The search is bounded by Timeout and the reply by MaxResponseBytes, and
// no more than the limit asked for (search.MaxLimit at most) are returned
// whatever the server sends. An empty query is [ErrEmptyQuery], without a
// request; a refusal by the server is [ErrSearchRefused].
func (c *Client) SearchURL(ctx context.Context, url, query string, opts *SearchOptions) ([]SearchResult, error) {
	if strings.TrimSpace(query) == "" {
		return nil, ErrEmptyQuery
	}
	if opts == nil {
		opts = &SearchOptions{}
	}
	u, limit, err := searchURL(url, query, opts)
	if err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	hc := http.Client{}
	if c.TableHTTPClient != nil {
		hc = *c.TableHTTPClient
	}
	// A redirect would take the bearer token elsewhere.
	hc.CheckRedirect = refuseRedirect
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("discovery: searching: %w", unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		msg := strings.TrimSpace(string(b))
		var er spec.ErrorResponse
		if json.Unmarshal(b, &er) == nil && er.Error.Message != "" {
			msg = er.Error.Message
		}
		if resp.StatusCode == http.StatusBadRequest {
			return nil, fmt.Errorf("%w: %s", ErrSearchRefused, msg)
		}
		return nil, fmt.Errorf("discovery: searching: %s: %s", resp.Status, msg)
	}
	bound := c.MaxResponseBytes
	if bound <= 0 {
		bound = DefaultMaxResponseBytes
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, bound+1))
	if err != nil {
		return nil, fmt.Errorf("discovery: reading the search result: %w", err)
	}
	if int64(len(b)) > bound {
		return nil, fmt.Errorf("%w: the search result is over %d bytes", ErrResponseTooLarge, bound)
	}
	var res struct {
		Tools []SearchResult `json:"tools"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("discovery: decoding the search result: %w", err)
	}
	if res.Tools == nil {
		return nil, errors.New("discovery: the search result holds no tools member")
	}
	if len(res.Tools) > limit {
		res.Tools = res.Tools[:limit]
	}
	for _, t := range res.Tools {
		if t.Name == "" {
			return nil, errors.New("discovery: the search result holds a tool without a name")
		}
	}
	return res.Tools, nil
}

// searchURL is base with the search's query parameters, and the most
// results to keep.
func searchURL(base, query string, opts *SearchOptions) (string, int, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", 0, fmt.Errorf("discovery: search URL: %w", err)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = search.DefaultLimit
	}
	limit = min(limit, search.MaxLimit)
	p := u.Query()
	p.Set("q", query)
	p.Set("limit", strconv.Itoa(limit))
	if opts.Namespace != "" {
		p.Set("namespace", opts.Namespace)
	}
	if opts.ToolSet != nil {
		p.Set("toolSet", opts.ToolSet.String())
	}
	if opts.ReadOnly != nil {
		p.Set("readOnly", strconv.FormatBool(*opts.ReadOnly))
	}
	if opts.Destructive != nil {
		p.Set("destructive", strconv.FormatBool(*opts.Destructive))
	}
	if opts.Category != "" {
		p.Set("category", opts.Category)
	}
	u.RawQuery = p.Encode()
	return u.String(), limit, nil
}
