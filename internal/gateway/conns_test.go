package gateway_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/gateway"
)

// serveListener serves g on loopback through g.Listener, or g.TLSListener
// with cfg, as cmd/gateway does, and returns its address.
func serveListener(t *testing.T, g *gateway.Gateway, cfg *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(g.TLSListener(l, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// callOnce posts one 2025-era tools/call of echo with hc and says what
// came of it: "ok", "refused" (429 or 503 with Retry-After and a JSON-RPC
// error), or an error for anything else, a reset above all.
func callOnce(hc *http.Client, url string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, url,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"result":`)):
		return "ok", nil
	case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) &&
		resp.Header.Get("Retry-After") != "" && resp.Close && bytes.Contains(body, []byte(`"code":-32000`)):
		return "refused", nil
	}
	return "", fmt.Errorf("status %d (Retry-After %q): %.300s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
}

// hammer runs clients concurrent clients, each with a keep-alive transport
// of its own (so a connection each, held between its calls, as
// independent callers behind one address hold theirs), calls calls each,
// and counts what came of them; the first error is returned.
func hammer(t *testing.T, url string, clients, calls int, newTransport func() *http.Transport) (ok, refused int, first error) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			tr := newTransport()
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			for range calls {
				got, err := callOnce(hc, url)
				mu.Lock()
				switch {
				case err != nil && first == nil:
					first = err
				case got == "ok":
					ok++
				case got == "refused":
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ok, refused, first
}

// A connection over --max-conns-per-client used to be closed as it was
// accepted, with the client's request unread in it: the kernel answered
// the request with a reset (as make bench-gateway's 32 clients saw, read:
// connection reset by peer). Every client must get an answer: a result,
// or a status it can retry on.
func TestManyClientsOverTheConnectionBoundGetAStatusNeverAReset(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	g := gateway.New(&gateway.Options{MaxConnsPerClient: 4, DialContext: new(routes).add(wl).dial})
	t.Cleanup(func() { _ = g.Close() })
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	url := "http://" + serveListener(t, g, nil) + "/mcp"
	ok, refused, err := hammer(t, url, 32, 5, func() *http.Transport { return &http.Transport{MaxIdleConnsPerHost: 1} })
	if err != nil {
		t.Fatalf("%d calls answered, %d refused, and one failed in transport: %v", ok, refused, err)
	}
	if ok == 0 || refused == 0 {
		t.Errorf("%d calls answered and %d refused: want both, over a bound of 4 connections for 32 clients", ok, refused)
	}
}

// The bound over the whole gateway answers 503, and over TLS the refusal
// is made over TLS too.
func TestConnectionsOverTheTotalBoundAreAnsweredOverTLS(t *testing.T) {
	wl := newWorkload(t, "crm", "crm-tools", "", echoTool("crm"))
	g := gateway.New(&gateway.Options{MaxConns: 2, DialContext: new(routes).add(wl).dial})
	t.Cleanup(func() { _ = g.Close() })
	if err := g.SetTable(table(wl.tableTools())); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS() // for its certificate
	cert := ts.TLS.Certificates[0]
	ts.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	addr := serveListener(t, g, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	newTransport := func() *http.Transport {
		return &http.Transport{MaxIdleConnsPerHost: 1, TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "example.com", MinVersion: tls.VersionTLS12}}
	}
	ok, refused, err := hammer(t, "https://"+addr+"/mcp", 8, 3, newTransport)
	if err != nil {
		t.Fatalf("%d calls answered, %d refused, and one failed in transport: %v", ok, refused, err)
	}
	if ok == 0 || refused == 0 {
		t.Errorf("%d calls answered and %d refused: want both, over a bound of 2 connections for 8 clients", ok, refused)
	}
	// The status says which bound. The hammer's connections are released
	// as the gateway sees them close: until then a call may be refused.
	hold := make([]*http.Transport, 2)
	for i := range hold {
		hold[i] = newTransport()
		defer hold[i].CloseIdleConnections()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := callOnce(&http.Client{Transport: hold[i]}, "https://"+addr+"/mcp")
			if got == "ok" {
				break
			}
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("a call within the bound: %q, %v", got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	resp, err := (&http.Client{Transport: newTransport()}).Post("https://"+addr+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("over the total bound: status %d, want 503", resp.StatusCode)
	}
}
