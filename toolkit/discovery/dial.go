package discovery

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// ServiceDialer returns a DialContext for an http.Transport that calls
// workloads through the Service names of a table: a host ending in
// .svc.<clusterDomain> (empty means [DefaultClusterDomain]) is looked up
// once, as rooted (with a final dot), and the addresses of that lookup are
// dialed, with no second lookup between the two; any other address is
// dialed by d as it is. Rooted, the name is taken as it is: a name of fewer
// dots than ndots (5 in a Pod) is first tried under every domain of the
// search path, and one of those could answer for it.
//
// It refuses, with [ErrServiceAlias], a Service name whose lookup read any
// reply holding a CNAME or a record of another name: that is an
// ExternalName Service, an alias of any host, another namespace's Service
// included. The operator publishes no endpoints for one, but only once it
// has seen it: one made an alias after its tools were published is in the
// table until the operator's next write reaches the caller. Every reply
// the lookup reads is looked at, not the one the resolver answers from, so
// that a reply of one record type that still shows the plain Service (the
// resolver asks for A and AAAA at once) does not hide another's CNAME. A
// transport reuses idle connections; each new one is looked up. What it
// cannot see is a Service without a selector whose addresses its owner
// writes; the operator refuses those.
//
// The lookup uses Go's own resolver (d.Resolver's Dial and StrictErrors,
// if d.Resolver is set), which lets it read every reply. The lookup and
// the dial together take at most d.Timeout, which the resolver's own
// timeouts (resolv.conf's timeout times attempts) do not bound.
func ServiceDialer(d *net.Dialer, clusterDomain string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	suffix := ".svc." + strings.ToLower(strings.Trim(cmp.Or(clusterDomain, DefaultClusterDomain), "."))
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !strings.HasSuffix(strings.ToLower(host), suffix) {
			return d.DialContext(ctx, network, addr)
		}
		if d.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d.Timeout)
			defer cancel()
		}
		addrs, err := lookupService(ctx, cmp.Or(d.Resolver, net.DefaultResolver), host)
		if err != nil {
			return nil, err
		}
		addrs = slices.DeleteFunc(addrs, func(ip netip.Addr) bool {
			return (network == "tcp4" && !ip.Is4()) || (network == "tcp6" && !ip.Is6())
		})
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no address for " + network, Name: host, IsNotFound: true}
		}
		// One address after another, each with an equal share of the time
		// left, as net.Dialer shares it between a name's addresses: one
		// that drops packets leaves the next its turn.
		var errs []error
		for i, ip := range addrs {
			actx, cancel := ctx, context.CancelFunc(func() {})
			if deadline, ok := ctx.Deadline(); ok {
				actx, cancel = context.WithTimeout(ctx, time.Until(deadline)/time.Duration(len(addrs)-i))
			}
			c, err := d.DialContext(actx, network, net.JoinHostPort(ip.String(), port))
			cancel()
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
}

// lookupService resolves host, a Service name, and refuses it if any reply
// read on the way shows an alias.
func lookupService(ctx context.Context, base *net.Resolver, host string) ([]netip.Addr, error) {
	w := &aliasWatch{host: host}
	r := &net.Resolver{PreferGo: true, StrictErrors: base.StrictErrors, Dial: w.dial(base.Dial)}
	addrs, err := r.LookupNetIP(ctx, "ip", host+".")
	if target := w.alias(); target != "" {
		return nil, &serviceAliasError{service: host, target: target}
	}
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs, nil
}

// serviceAliasError is a Service name that resolves through a CNAME.
type serviceAliasError struct{ service, target string }

func (e *serviceAliasError) Error() string {
	return fmt.Sprintf("Service %s is an alias of %s (an ExternalName Service): refused, its calls would leave the ToolSet's namespace", e.service, e.target)
}

func (e *serviceAliasError) Unwrap() error { return ErrServiceAlias }

// aliasWatch reads the DNS replies of one lookup of host, on every
// connection the resolver makes, and keeps the first record that is not
// host's own address.
type aliasWatch struct {
	host   string
	mu     sync.Mutex
	target string
}

func (w *aliasWatch) alias() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.target
}

// dial wraps the resolver's connections (dial, or a net.Dialer's if nil) so
// that every reply read through them is inspected.
func (w *aliasWatch) dial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		// The resolver reads a packet connection a message at a time and a
		// stream one as length-prefixed messages.
		if pc, ok := c.(packetConn); ok {
			return &watchedPacketConn{packetConn: pc, w: w}, nil
		}
		return &watchedStreamConn{Conn: c, w: w}, nil
	}
}

// inspect looks at one reply. A reply that does not parse is the
// resolver's to refuse; inspect reads no further than the resolver would.
func (w *aliasWatch) inspect(msg []byte) {
	var p dnsmessage.Parser
	if _, err := p.Start(msg); err != nil {
		return
	}
	if err := p.SkipAllQuestions(); err != nil {
		return
	}
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return
		}
		// The root trims to "": it is a name too.
		name := cmp.Or(strings.TrimSuffix(h.Name.String(), "."), ".")
		target := ""
		switch {
		case h.Type == dnsmessage.TypeCNAME:
			target = name
			if r, err := p.CNAMEResource(); err == nil {
				target = cmp.Or(strings.TrimSuffix(r.CNAME.String(), "."), ".")
			}
		case !strings.EqualFold(name, w.host):
			target = name
		default:
			// A record whose length runs past the message leaves the
			// parser where it was: stop, or read it forever.
			if err := p.SkipAnswer(); err != nil {
				return
			}
			continue
		}
		w.mu.Lock()
		if w.target == "" {
			w.target = target
		}
		w.mu.Unlock()
		return
	}
}

type packetConn interface {
	net.Conn
	net.PacketConn
}

type watchedPacketConn struct {
	packetConn
	w *aliasWatch
}

func (c *watchedPacketConn) Read(b []byte) (int, error) {
	n, err := c.packetConn.Read(b)
	if n > 0 {
		c.w.inspect(b[:n])
	}
	return n, err
}

// watchedStreamConn reassembles the length-prefixed messages of a DNS
// stream (TCP) as the resolver reads them.
type watchedStreamConn struct {
	net.Conn
	w   *aliasWatch
	buf []byte
}

func (c *watchedStreamConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.buf = append(c.buf, b[:n]...)
	for len(c.buf) >= 2 {
		l := int(binary.BigEndian.Uint16(c.buf))
		if len(c.buf) < 2+l {
			break
		}
		c.w.inspect(c.buf[2 : 2+l])
		c.buf = c.buf[2+l:]
	}
	return n, err
}

// defaultTransports are the transports of clients without an HTTPClient,
// by cluster domain.
var defaultTransports sync.Map

// httpClient is c.HTTPClient, or one whose transport has
// http.DefaultTransport's settings (as it is when first needed), no proxy,
// and ServiceDialer's dial.
func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	domain := strings.ToLower(strings.Trim(cmp.Or(c.ClusterDomain, DefaultClusterDomain), "."))
	tr, ok := defaultTransports.Load(domain)
	if !ok {
		t := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConns: 100,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second}
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			t = dt.Clone()
		}
		// Service names are dialed, never handed to a proxy from the
		// environment, which would resolve them itself, aliases and all.
		t.Proxy = nil
		t.DialContext = ServiceDialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, domain)
		tr, _ = defaultTransports.LoadOrStore(domain, t)
	}
	return &http.Client{Transport: tr.(*http.Transport)}
}
