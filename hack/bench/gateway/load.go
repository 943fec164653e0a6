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
// endpoint at urls, one after the other: the workload's own, or the
// floor's replicas in front of it.
func directTargeter(urls ...string) targeter {
	hdr := http.Header{"Content-Type": {"application/json"}}
	body := []byte(`{"a":1,"b":2}`)
	var seq atomic.Uint64
	return targeter{
		next: func(t *vegeta.Target) error {
			u := urls[seq.Add(1)%uint64(len(urls))]
			t.Method, t.URL, t.Body, t.Header = http.MethodPost, u, body, hdr
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

// metrics are one path's figures over the rounds of a phase, for every
// request and per era: latencies, counts and status codes from vegeta,
// which merges results of any number of attacks; throughput from the
// rounds' own time (vegeta's own Throughput would count the time between
// them).
type metrics struct {
	all  *vegeta.Metrics
	eras map[string]*vegeta.Metrics
	// active is the rounds' time, each from its first request to its last
	// answer, summed.
	active time.Duration
}

func newMetrics() metrics {
	return metrics{all: &vegeta.Metrics{}, eras: map[string]*vegeta.Metrics{era2026: {}, era2025: {}}}
}

func (m metrics) close() {
	m.all.Close()
	for _, e := range m.eras {
		e.Close()
	}
}

// throughput is calls answered a second in the rounds, all of them
// (era "") or of one era. Every call counts: a failed one fails its phase.
func (m metrics) throughput(era string) float64 {
	if m.active <= 0 {
		return 0
	}
	n := m.all.Requests
	if era != "" {
		n = m.eras[era].Requests
	}
	return float64(n) / m.active.Seconds()
}

// path is one of the ways to the tool that a phase compares, and the
// CPU counters of the processes that serve it.
type path struct {
	name string
	tr   targeter
	cpu  func() []time.Duration
}

// interleave runs the phase name over paths in rounds, one path after
// the other, each round du/rounds long, at rate (see attack), and returns
// each path's metrics and the CPU its processes spent in its rounds.
// Alternating spreads a drift in what the machine gives the bench (another
// tenant of its host, a CPU's clock) over every path alike, where one
// path's du after the other's would charge it to one.
func interleave(ctx context.Context, name string, paths []path, rate, clients, rounds int, du time.Duration) ([]metrics, [][]time.Duration, error) {
	ms := make([]metrics, len(paths))
	cpus := make([][]time.Duration, len(paths))
	for i := range paths {
		ms[i] = newMetrics()
	}
	slice := du / time.Duration(rounds)
	for range rounds {
		for i, p := range paths {
			before := p.cpu()
			if err := attack(ctx, name+"-"+p.name, p.tr, rate, clients, slice, &ms[i]); err != nil {
				return nil, nil, err
			}
			after := p.cpu()
			if cpus[i] == nil {
				cpus[i] = make([]time.Duration, len(after))
			}
			for j := range after {
				cpus[i][j] += after[j] - before[j]
			}
		}
	}
	for _, m := range ms {
		m.close()
	}
	return ms, cpus, nil
}

// attack runs tr for du: closed-loop with clients workers as fast as the
// path answers when rate is 0, else open-loop at rate requests per second.
// It adds every result, and the time from its first request to its last
// answer, to m. A failed call fails it.
func attack(ctx context.Context, name string, tr targeter, rate, clients int, du time.Duration, m *metrics) error {
	// At most clients connections to each host, all kept alive: as many
	// as clients closed-loop callers need, and what each replica's
	// --max-conns-per-client (64) admits from the one loopback address.
	// They are closed when the attack ends, so that one attack's idle
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
	var (
		failed, n  int
		first      error
		start, end time.Time
	)
	results := atk.Attack(tr.next, pace, du, name)
	for {
		select {
		case <-ctx.Done():
			atk.Stop()
			for range results {
			}
			return ctx.Err()
		case r, ok := <-results:
			if !ok {
				if n > 0 {
					m.active += end.Sub(start)
				}
				if failed > 0 {
					return fmt.Errorf("%s: %d of %d calls failed; the first: %w", name, failed, n, first)
				}
				return nil
			}
			if err := tr.check(r); err != nil {
				failed++
				if first == nil {
					first = err
				}
			}
			if n++; n == 1 || r.Timestamp.Before(start) {
				start = r.Timestamp
			}
			if e := r.End(); e.After(end) {
				end = e
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
