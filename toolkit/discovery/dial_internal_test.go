package discovery

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// reply builds a DNS reply to an A query for host with the given answers.
func reply(t *testing.T, host string, answers func(b *dnsmessage.Builder)) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, Response: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(host + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	_ = b.StartAnswers()
	answers(&b)
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// Over TCP (a truncated UDP reply, or resolv.conf's use-vc) the resolver
// reads length-prefixed messages in pieces of any size; the watch sees each
// whole message however the reads cut them.
func TestAliasWatchReadsAStreamInPieces(t *testing.T) {
	const host = "tools.crm.svc.cluster.local"
	hdr := func(name string) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name + "."), Class: dnsmessage.ClassINET, TTL: 5}
	}
	plain := reply(t, host, func(b *dnsmessage.Builder) {
		_ = b.AResource(hdr(host), dnsmessage.AResource{A: [4]byte{10, 0, 0, 1}})
	})
	alias := reply(t, host, func(b *dnsmessage.Builder) {
		_ = b.CNAMEResource(hdr(host), dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("vault-api.vault.svc.cluster.local.")})
		_ = b.AResource(hdr("vault-api.vault.svc.cluster.local"), dnsmessage.AResource{A: [4]byte{10, 0, 0, 2}})
	})
	var stream []byte
	for _, m := range [][]byte{plain, alias} {
		stream = binary.BigEndian.AppendUint16(stream, uint16(len(m)))
		stream = append(stream, m...)
	}

	for _, piece := range []int{1, 2, 3, 7, len(stream)} {
		server, client := net.Pipe()
		go func() {
			for i := 0; i < len(stream); i += piece {
				_, _ = server.Write(stream[i:min(i+piece, len(stream))])
			}
			_ = server.Close()
		}()
		w := &aliasWatch{host: host}
		c := &watchedStreamConn{Conn: client, w: w}
		buf := make([]byte, piece)
		for {
			if _, err := c.Read(buf); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if got := w.alias(); got != "vault-api.vault.svc.cluster.local" {
			t.Errorf("read %d bytes at a time: the watch found %q, want the CNAME's target", piece, got)
		}
	}

	// The plain reply alone shows no alias.
	w := &aliasWatch{host: host}
	w.inspect(plain)
	if got := w.alias(); got != "" {
		t.Errorf("a plain reply: the watch found %q", got)
	}
}

// Found by the red team: a record of the Service's own name whose length
// runs past the message left the parser where it was, and inspect read its
// header again forever, in the resolver's goroutine, after the dial had
// given up. A hostile DNS server sent one per query.
func TestAliasWatchStopsAtARecordThatOverrunsItsMessage(t *testing.T) {
	const host = "tools.crm.svc.cluster.local"
	msg := reply(t, host, func(b *dnsmessage.Builder) {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(host + "."), Class: dnsmessage.ClassINET, TTL: 5},
			dnsmessage.AResource{A: [4]byte{10, 0, 0, 9}})
	})
	binary.BigEndian.PutUint16(msg[len(msg)-6:], 0xffff) // the A record's length
	done := make(chan struct{})
	go func() {
		(&aliasWatch{host: host}).inspect(msg)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("inspect has not returned from a record whose length overruns the message")
	}
}

// A CNAME to the root, or a record of the root, is an alias too: the root
// trims to an empty name.
func TestAliasWatchSeesTheRoot(t *testing.T) {
	const host = "tools.crm.svc.cluster.local"
	root := dnsmessage.MustNewName(".")
	for name, msg := range map[string][]byte{
		"a CNAME to the root": reply(t, host, func(b *dnsmessage.Builder) {
			_ = b.CNAMEResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(host + "."), Class: dnsmessage.ClassINET}, dnsmessage.CNAMEResource{CNAME: root})
		}),
		"an address of the root": reply(t, host, func(b *dnsmessage.Builder) {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: root, Class: dnsmessage.ClassINET}, dnsmessage.AResource{A: [4]byte{10, 0, 0, 2}})
		}),
	} {
		w := &aliasWatch{host: host}
		w.inspect(msg)
		if got := w.alias(); got != "." {
			t.Errorf("%s: the watch found %q, want the root", name, got)
		}
	}
}

// The gateway dials the addresses it looked up, not the name; an https
// workload is still asked for the Service's name in the TLS handshake.
func TestAWorkloadOverTLSIsAskedForTheServiceName(t *testing.T) {
	const host = "tools.crm.svc.cluster.local"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := serveDNS(t, func(q dnsmessage.Question, b *dnsmessage.Builder) {
		if q.Type == dnsmessage.TypeA {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET}, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
		}
	})
	tr := &http.Transport{DialContext: ServiceDialer(&net.Dialer{Timeout: 5 * time.Second, Resolver: r}, "")}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	var asked string
	tr.TLSClientConfig = &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the test's server has no certificate for the name; what it is asked for is the point
		VerifyConnection:   func(cs tls.ConnectionState) error { asked = cs.ServerName; return nil },
	}
	resp, err := c.Get("https://" + host + ":" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if asked != host {
		t.Errorf("the TLS handshake asked for %q, want the Service name %q", asked, host)
	}
}

// serveDNS answers every query on loopback with the answers answer adds,
// and returns a resolver that asks it.
func serveDNS(t *testing.T, answer func(q dnsmessage.Question, b *dnsmessage.Builder)) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			answer(q, &b)
			if msg, err := b.Finish(); err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// aliasSetup starts a workload, a DNS server that makes every name
// beginning "alias." a CNAME of another namespace's Service (answered with
// the workload's loopback address), and installs it as net.DefaultResolver.
func aliasSetup(t *testing.T) (port string, calls *atomic.Int32, queries *sync.Map) {
	calls = new(atomic.Int32)
	queries = new(sync.Map)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"called"}]}`)
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	const target = "vault-api.vault.svc.cluster.local."
	hdr := func(name dnsmessage.Name) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: 5}
	}
	loopback := dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}}
	r := serveDNS(t, func(q dnsmessage.Question, b *dnsmessage.Builder) {
		queries.Store(q.Name.String(), true)
		if q.Type != dnsmessage.TypeA {
			return
		}
		if strings.HasPrefix(strings.ToLower(q.Name.String()), "alias.") {
			_ = b.CNAMEResource(hdr(q.Name), dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(target)})
			_ = b.AResource(hdr(dnsmessage.MustNewName(target)), loopback)
			return
		}
		_ = b.AResource(hdr(q.Name), loopback)
	})
	old := net.DefaultResolver
	net.DefaultResolver = r
	t.Cleanup(func() { net.DefaultResolver = old })
	return port, calls, queries
}

// A Client without an HTTPClient dials through ServiceDialer: a Service
// name that is an alias is refused with ErrServiceAlias before anything is
// sent, and a plain one is called at the address it resolves to. Its
// transport takes no proxy from the environment: a proxy would resolve the
// name itself, through the alias (the red team's; http reads the
// environment once a process, so this looks at the transport).
func TestACallerNeverCallsThroughAnAlias(t *testing.T) {
	port, calls, _ := aliasSetup(t)
	var tools []spec.TableTool
	for _, svc := range []string{"tools", "alias"} {
		tools = append(tools, spec.TableTool{
			Name: svc + "_echo", SourceName: "echo", InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet:   spec.ObjectReference{Namespace: "crm", Name: svc},
			Endpoints: &spec.Endpoints{Invoke: "http://" + svc + ".crm.svc.cluster.local:" + port + spec.InvokePrefix + "echo"},
		})
	}
	c := &Client{}
	if err := c.SetTable(&spec.Table{SchemaVersion: spec.SchemaVersion, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), "alias_echo", map[string]any{}); !errors.Is(err, ErrServiceAlias) {
		t.Errorf("calling through an alias: %v, want ErrServiceAlias", err)
	} else if !strings.Contains(err.Error(), "vault-api.vault.svc.cluster.local") {
		t.Errorf("the refusal %q does not name the alias's target", err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the workload saw %d calls through the alias", n)
	}
	if res, err := c.Call(context.Background(), "tools_echo", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("calling through a plain Service: %v %+v", err, res)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the workload saw %d calls, want 1", n)
	}
	if tr, ok := c.httpClient().Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Errorf("the default transport %T takes a proxy", c.httpClient().Transport)
	}
}

// Found by the red team: Call sent to the table's URL as written, so an
// endpoint CheckServiceEndpoint accepts with a trailing dot or in an older
// table's form (<service>.<namespace>.svc) was not dialed as a Service name
// and went through the alias (the older form walking the search path to
// reach it). Every form accepted for an alias Service of namespace crm is
// refused with ErrServiceAlias by a zero Client, for invoke and MCP entries
// alike, and never reaches the workload.
func TestEveryFormOfAnAliasEndpointIsRefused(t *testing.T) {
	port, calls, _ := aliasSetup(t)
	hosts := []string{
		"alias.crm.svc.cluster.local", // control
		"ALIAS.CRM.SVC.CLUSTER.LOCAL",
		"alias.crm.svc.cluster.local.", // trailing dot
		"alias.crm.svc",                // older tables' form
		"alias.crm.svc.",
	}
	for _, domain := range []string{"", "Cluster.Local.", ".cluster.local"} {
		for _, host := range hosts {
			for _, mcpEntry := range []bool{false, true} {
				name := fmt.Sprintf("domain=%q host=%q mcp=%v", domain, host, mcpEntry)
				tool := spec.TableTool{
					Name: "alias_echo", SourceName: "echo", InputSchema: json.RawMessage(`{"type":"object"}`),
					ToolSet: spec.ObjectReference{Namespace: "crm", Name: "alias"},
				}
				if mcpEntry {
					tool.Protocol = spec.ProtocolMCP
					tool.Endpoints = &spec.Endpoints{MCP: "http://" + host + ":" + port + "/mcp"}
				} else {
					tool.Endpoints = &spec.Endpoints{Invoke: "http://" + host + ":" + port + spec.InvokePrefix + "echo"}
				}
				if _, err := CheckServiceEndpoint(tool.Endpoints.Invoke+tool.Endpoints.MCP, "crm", domain); err != nil {
					t.Logf("%s: not accepted by CheckServiceEndpoint: %v", name, err)
					continue
				}
				c := &Client{ClusterDomain: domain}
				if err := c.SetTable(&spec.Table{SchemaVersion: spec.SchemaVersion, Tools: []spec.TableTool{tool}}); err != nil {
					t.Fatal(err)
				}
				before := calls.Load()
				_, err := c.Call(context.Background(), "alias_echo", map[string]any{})
				if !errors.Is(err, ErrServiceAlias) {
					t.Errorf("%s: %v, want ErrServiceAlias", name, err)
				}
				if n := calls.Load() - before; n != 0 {
					t.Errorf("%s: the workload saw %d requests through the alias", name, n)
				}
			}
		}
	}
}
