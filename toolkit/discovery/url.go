package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Defaults of [Client.WatchURL].
const (
	// DefaultWatchInterval is the time between two conditional GETs of a
	// table that has not changed.
	DefaultWatchInterval = 30 * time.Second
	// maxWatchBackoff caps the wait after failed GETs.
	maxWatchBackoff = 5 * time.Minute
)

// ErrNotModified is what FetchURL returns when the table at the URL still
// has the revision the client holds (304).
var ErrNotModified = errors.New("discovery: tool table not modified")

// FetchURL GETs the tool table served at url, such as the toolplane
// gateway's GET /v1/tools, and returns it. If ifRevision is not empty it is
// sent as If-None-Match, and a 304 gives [ErrNotModified]. The reply is
// bounded by [spec.MaxTableBytes]; gzip is asked for and undone.
//
// hc makes the GET; nil means http.DefaultClient. A gateway that
// authenticates callers wants a bearer token: give it through hc's
// transport, and keep that client apart from [Client.HTTPClient], which
// calls workloads and must never carry the token to them.
func FetchURL(ctx context.Context, hc *http.Client, url, ifRevision string) (*spec.Table, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if ifRevision != "" {
		req.Header.Set("If-None-Match", spec.ETag(ifRevision))
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("discovery: fetching the tool table: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return nil, ErrNotModified
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("discovery: fetching the tool table: %s: %s", resp.Status, b)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, spec.MaxTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("discovery: reading the tool table: %w", err)
	}
	if len(b) > spec.MaxTableBytes {
		return nil, fmt.Errorf("%w: over %d bytes", spec.ErrTableTooLarge, spec.MaxTableBytes)
	}
	return spec.DecodeTable(map[string][]byte{spec.TableKey: b})
}

// LoadURL replaces the client's table with the one served at url; see
// [FetchURL]. TableHTTPClient makes the GET.
func (c *Client) LoadURL(ctx context.Context, url string) error {
	t, err := FetchURL(ctx, c.TableHTTPClient, url, "")
	if err != nil {
		return err
	}
	return c.SetTable(t)
}

// WatchURL follows the table served at url until ctx is done: it GETs it
// every interval (zero means [DefaultWatchInterval]) with the revision it
// holds as If-None-Match, so that a table that did not change costs a 304
// and no decoding. A failed GET is logged, the last good table kept, and
// the next one tried after a backoff that doubles up to five minutes, with
// jitter so that many agents do not poll in step. Each new revision is
// passed to OnChange. TableHTTPClient makes the GETs.
//
// WatchURL returns nil when ctx is done. To fail fast on an unreachable
// table at start-up, call [Client.LoadURL] first.
func (c *Client) WatchURL(ctx context.Context, url string, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	wait, failures := time.Duration(0), 0
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		var have string
		if c.state.Load() != nil {
			have = c.Revision()
		}
		t, err := FetchURL(ctx, c.TableHTTPClient, url, have)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrNotModified):
			failures = 0
		case err != nil:
			failures++
			c.logger().Warn("Kept the last good tool table: fetching the update failed",
				"url", url, "revision", c.Revision(), "failures", failures, "err", err)
		default:
			failures = 0
			if t.Revision != have {
				if err := c.SetTable(t); err != nil {
					c.logger().Warn("Kept the last good tool table: the update is invalid", "url", url, "err", err)
				} else {
					c.logger().Info("Loaded the tool table", "url", url, "revision", t.Revision, "tools", len(t.Tools))
					if c.OnChange != nil {
						c.OnChange(t)
					}
				}
			}
		}
		wait = backoff(interval, failures)
	}
}

// backoff is interval after a success, and interval·2^failures (capped)
// after failures, each with up to 20% jitter.
func backoff(interval time.Duration, failures int) time.Duration {
	d := interval
	for i := 0; i < failures && d < maxWatchBackoff; i++ {
		d *= 2
	}
	d = min(d, max(maxWatchBackoff, interval))
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}
