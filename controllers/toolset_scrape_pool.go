package controllers

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// maxIdlePerAddress bounds the idle connections a pool keeps to one
// address (a Pod's IP and port): as many as scrapes of the namespace run
// at once against it, up to this many.
const maxIdlePerAddress = 8

// poolKey identifies a pool: the namespace of its ToolSets and their
// settings (see scrapeTarget.clientSettings). Pools are never shared
// across namespaces.
type poolKey struct {
	namespace string
	settings  clientSettings
}

// connPool is the keep-alive transport of the ToolSets of one namespace
// that scrape under the same settings. Its idle connections count against
// the scraper's bound by address: an address reserves one connection for
// each of its scrapes in flight at once, up to maxIdlePerAddress, while the
// bound has room, and keeps the reservation until it goes unused for the
// pool's idle timeout (two intervals: the transport closes its idle
// connections then too). A scrape past its address's reservation, with the
// bound reserved, closes its connection when it is done, so the idle
// connections kept stay within the bound however many Pods there are; the
// addresses reserved first keep theirs, and the others connect anew each
// round, as before the bound was reached.
type connPool struct {
	key    poolKey
	tr     *http.Transport
	client *http.Client
	// users counts the ToolSets whose client this is.
	users int
	// hosts are the addresses scraped through the pool, by host:port,
	// guarded by the scraper's mu.
	hosts       map[string]*addressSlot
	idleTimeout time.Duration
}

// addressSlot is what a pool holds of one address: its scrapes in flight,
// the idle connections it reserved, and when it was last scraped.
type addressSlot struct {
	inFlight, reserved int
	used               time.Time
}

func (s *scraper) newPool(key poolKey, t scrapeTarget) *connPool {
	p := &connPool{key: key, hosts: map[string]*addressSlot{}, idleTimeout: t.idleTimeout()}
	perHost := min(maxIdlePerAddress, max(int(s.perNamespace), 1))
	// The transport's own bound is the scraper's: the reservations keep
	// the pools within it together.
	p.tr = t.newTransport(s.idle, perHost)
	p.client = t.clientOver(&poolRoundTripper{s: s, p: p})
	return p
}

// begin counts a scrape of host in flight and reports whether its
// connection may be kept idle after it.
func (s *scraper) begin(p *connPool, host string) bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	h := p.hosts[host]
	if h == nil {
		h = &addressSlot{}
		p.hosts[host] = h
	}
	h.inFlight++
	h.used = now
	if h.inFlight > h.reserved && h.reserved < maxIdlePerAddress && s.reserveLocked(now) {
		h.reserved++
	}
	return h.inFlight <= h.reserved
}

// end counts a scrape of host done.
func (s *scraper) end(p *connPool, host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := p.hosts[host]; h != nil {
		h.inFlight--
		if h.inFlight <= 0 && h.reserved == 0 {
			delete(p.hosts, host)
		}
	}
}

// reserveLocked takes one idle connection of the bound, returning first
// the reservations of addresses unused past their pool's idle timeout (at
// most once a second) if the bound is reserved.
func (s *scraper) reserveLocked(now time.Time) bool {
	if s.reserved >= s.idle && now.Sub(s.swept) >= time.Second {
		s.swept = now
		for _, p := range s.pools {
			for host, h := range p.hosts {
				if h.inFlight == 0 && now.Sub(h.used) >= p.idleTimeout {
					s.reserved -= h.reserved
					delete(p.hosts, host)
				}
			}
		}
	}
	if s.reserved >= s.idle {
		return false
	}
	s.reserved++
	return true
}

// poolRoundTripper sends a pool's requests through its transport; a
// request past its address's reservation closes its connection when done.
type poolRoundTripper struct {
	s *scraper
	p *connPool
}

func (rt *poolRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if !rt.s.begin(rt.p, host) {
		req = req.Clone(req.Context())
		req.Close = true
	}
	resp, err := rt.p.tr.RoundTrip(req)
	if err != nil {
		rt.s.end(rt.p, host)
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, rt: rt, host: host}
	return resp, nil
}

// doneBody ends its scrape of host once, when the body is first closed:
// one allocation a round.
type doneBody struct {
	io.ReadCloser
	rt     *poolRoundTripper
	host   string
	closed atomic.Bool
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.closed.Swap(true) {
		b.rt.s.end(b.rt.p, b.host)
	}
	return err
}
