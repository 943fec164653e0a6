package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The two MCP protocol eras, as the gateway's requests are tagged with
// them: the tag is a query parameter that the gateway ignores, so that each
// result says which era it was.
const (
	era2026 = "2026-07-28"
	era2025 = "2025-11-25"
)

// targeter is a vegeta targeter that also says how a result is checked.
type targeter struct {
	next  vegeta.Targeter
	check func(*vegeta.Result) error
}

// directTargeter posts the add tool's arguments to the workload's invoke
// endpoint at url.
func directTargeter(url string) targeter {
	hdr := http.Header{"Content-Type": {"application/json"}}
	body := []byte(`{"a":1,"b":2}`)
	return targeter{
		next: func(t *vegeta.Target) error {
			t.Method, t.URL, t.Body, t.Header = http.MethodPost, url, body, hdr
			return nil
		},
		check: checkResult,
	}
}

// callTemplate is one recorded tools/call request of the Go SDK client,
// with the tool's name to be replaced in its body and headers.
type callTemplate struct {
	name   string
	body   []byte
	header http.Header
}

func (c callTemplate) with(name string) ([]byte, http.Header) {
	h := make(http.Header, len(c.header))
	for k, vs := range c.header {
		for _, v := range vs {
			h.Add(k, strings.ReplaceAll(v, c.name, name))
		}
	}
	return bytes.ReplaceAll(c.body, []byte(`"`+c.name+`"`), []byte(`"`+name+`"`)), h
}

// gatewayTargeter calls tools drawn at random from names on the gateways
// at urls, one replica after the other and one era after the other, with
// the requests the Go SDK client sends in each era.
func gatewayTargeter(ctx context.Context, urls, names []string) (targeter, error) {
	type request struct {
		url    string
		body   []byte
		header http.Header
	}
	// The requests are made up front, one per replica, era and tool,
	// so that the generator spends nothing on them while it measures.
	reqs := make([][]request, 0, 2*len(urls))
	for _, era := range []string{era2026, era2025} {
		tmpl, err := recordCall(ctx, urls[0]+"/mcp", era, names[0])
		if err != nil {
			return targeter{}, fmt.Errorf("recording the Go SDK's tools/call at %s: %w", era, err)
		}
		for _, u := range urls {
			rs := make([]request, len(names))
			for i, n := range names {
				body, hdr := tmpl.with(n)
				rs[i] = request{url: u + "/mcp?era=" + era, body: body, header: hdr}
			}
			reqs = append(reqs, rs)
		}
	}
	var seq atomic.Uint64
	return targeter{
		next: func(t *vegeta.Target) error {
			// Replicas alternate on every request, eras on every second,
			// so that both eras reach both replicas alike.
			n := seq.Add(1)
			replica, era := int(n%uint64(len(urls))), int(n/uint64(len(urls))%2)
			r := reqs[era*len(urls)+replica][rand.IntN(len(names))]
			t.Method, t.URL, t.Body, t.Header = http.MethodPost, r.url, r.body, r.header
			return nil
		},
		check: func(r *vegeta.Result) error {
			if err := checkResult(r); err != nil {
				return err
			}
			// A JSON-RPC error has no "result"; the SDK's
			// encoding has no space after the colon.
			if !bytes.Contains(r.Body, []byte(`"result":`)) {
				return fmt.Errorf("not a tools/call result: %.300s", r.Body)
			}
			return nil
		},
	}, nil
}

// checkResult fails a call that failed in transport, in HTTP or as a tool.
func checkResult(r *vegeta.Result) error {
	switch {
	case r.Error != "":
		return errors.New(r.Error)
	case r.Code != http.StatusOK:
		return fmt.Errorf("status %d: %.300s", r.Code, r.Body)
	case bytes.Contains(r.Body, []byte(`"isError":true`)):
		return fmt.Errorf("an error result: %.300s", r.Body)
	}
	return nil
}

// recordCall connects the Go SDK client to endpoint at era, calls tool once,
// and returns the tools/call request it sent.
func recordCall(ctx context.Context, endpoint, era, tool string) (callTemplate, error) {
	rec := &recorder{base: &http.Transport{}}
	defer rec.base.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-gateway", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		return callTemplate{}, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil {
		return callTemplate{}, err
	}
	if res.IsError {
		return callTemplate{}, fmt.Errorf("%s answered an error result: %+v", tool, res.Content)
	}
	if cs.ID() != "" {
		return callTemplate{}, fmt.Errorf("the gateway gave the %s client session %q: it should answer statelessly", era, cs.ID())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.call == nil {
		return callTemplate{}, errors.New("no tools/call request seen")
	}
	rec.call.name = tool
	return *rec.call, nil
}

// recorder is a transport that keeps the last tools/call request it sends.
type recorder struct {
	base *http.Transport
	mu   sync.Mutex
	call *callTemplate
}

func (rt *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			rt.mu.Lock()
			rt.call = &callTemplate{body: body, header: r.Header.Clone()}
			rt.mu.Unlock()
		}
	}
	return rt.base.RoundTrip(r)
}

// metrics are one phase's figures, for every request and per era.
type metrics struct {
	all  *vegeta.Metrics
	eras map[string]*vegeta.Metrics
}

// attack runs tr for du: closed-loop with clients workers as fast as the
// path answers when rate is 0, else open-loop at rate requests per second.
// A failed call fails it.
func attack(ctx context.Context, name string, tr targeter, rate, clients int, du time.Duration) (metrics, error) {
	// At most clients connections to each host, all kept alive: as many
	// as clients closed-loop callers need, and what each replica's
	// --max-conns-per-client (64) admits from the one loopback address.
	// They are closed when the phase ends, so that one phase's idle
	// connections do not count against the next's.
	ht := &http.Transport{
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: clients,
		MaxConnsPerHost:     clients,
	}
	defer ht.CloseIdleConnections()
	opts := []func(*vegeta.Attacker){
		vegeta.Client(&http.Client{Transport: ht}),
		vegeta.Workers(uint64(clients)), vegeta.Connections(clients), vegeta.MaxConnections(clients),
		vegeta.KeepAlive(true), vegeta.HTTP2(false), vegeta.Timeout(30 * time.Second), vegeta.MaxBody(64 << 10),
	}
	pace := vegeta.Rate{Freq: rate, Per: time.Second}
	if rate == 0 {
		opts = append(opts, vegeta.MaxWorkers(uint64(clients)))
	} else {
		// An open loop keeps its pace: more workers join while calls are
		// slow, within a bound.
		opts = append(opts, vegeta.MaxWorkers(uint64(16*clients)))
	}
	atk := vegeta.NewAttacker(opts...)
	m := metrics{all: &vegeta.Metrics{}, eras: map[string]*vegeta.Metrics{era2026: {}, era2025: {}}}
	var failed int
	var first error
	results := atk.Attack(tr.next, pace, du, name)
	for {
		select {
		case <-ctx.Done():
			atk.Stop()
			for range results {
			}
			return m, ctx.Err()
		case r, ok := <-results:
			if !ok {
				m.all.Close()
				for _, e := range m.eras {
					e.Close()
				}
				if failed > 0 {
					return m, fmt.Errorf("%s: %d of %d calls failed; the first: %w", name, failed, m.all.Requests, first)
				}
				return m, nil
			}
			if err := tr.check(r); err != nil {
				failed++
				if first == nil {
					first = err
				}
			}
			r.Body = nil
			m.all.Add(r)
			for era, e := range m.eras {
				if strings.HasSuffix(r.URL, "era="+era) {
					e.Add(r)
				}
			}
		}
	}
}
