package gateway_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// rr is one answer record a hostile DNS server sends.
type rr struct {
	typ    dnsmessage.Type
	owner  string
	target string // CNAME
	ip     net.IP // A, AAAA
}

// fakeDNS stands in for the cluster's DNS server on loopback, and for a
// hostile one: it answers each query with whatever answer says, after its
// delay (never, for nil records and a negative delay). n counts the queries
// received before this one.
type fakeDNS struct {
	addr   string
	n      atomic.Int32
	mu     sync.Mutex
	log    []string
	answer func(q dnsmessage.Question, n int) ([]rr, time.Duration)
}

func newFakeDNS(t *testing.T, answer func(q dnsmessage.Question, n int) ([]rr, time.Duration)) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	d := &fakeDNS{addr: pc.LocalAddr().String(), answer: answer}
	start := time.Now()
	go func() {
		for {
			buf := make([]byte, 1500)
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
			i := int(d.n.Add(1)) - 1
			d.mu.Lock()
			d.log = append(d.log, time.Since(start).Round(100*time.Millisecond).String()+" "+q.Type.String()+" "+q.Name.String())
			d.mu.Unlock()
			recs, delay := d.answer(q, i)
			if recs == nil && delay < 0 {
				continue // never answer
			}
			go func() {
				time.Sleep(delay)
				b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
				_ = b.StartQuestions()
				_ = b.Question(q)
				_ = b.StartAnswers()
				for _, r := range recs {
					hdr := dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(r.owner + "."), Class: dnsmessage.ClassINET, TTL: 5}
					switch r.typ {
					case dnsmessage.TypeCNAME:
						_ = b.CNAMEResource(hdr, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(r.target + ".")})
					case dnsmessage.TypeA:
						var a [4]byte
						copy(a[:], r.ip.To4())
						_ = b.AResource(hdr, dnsmessage.AResource{A: a})
					case dnsmessage.TypeAAAA:
						var a [16]byte
						copy(a[:], r.ip.To16())
						_ = b.AAAAResource(hdr, dnsmessage.AAAAResource{AAAA: a})
					}
				}
				msg, err := b.Finish()
				if err == nil {
					_, _ = pc.WriteTo(msg, from)
				}
			}()
		}
	}()
	return d
}

func (d *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", d.addr)
	}}
}

func (d *fakeDNS) queries() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.log, "; ")
}

const (
	aliasHost = "alias.crm.svc.cluster.local"
	vaultHost = "vault-api.vault.svc.cluster.local"
)

// vaultSetup serves the "vault" namespace's workload on 127.0.0.1 and a
// gateway whose table has crm's tool alias_count at alias.crm.svc…:<vault's
// port>. The crm Service's own (plain) address is 127.0.0.3, where nothing
// listens: a call that succeeds reached vault.
func vaultSetup(t *testing.T, d *fakeDNS, o gateway.Options) (*mcp.ClientSession, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	count := toolkit.MustNew("count", "Counts its calls", func(context.Context, struct{}) (string, error) {
		calls.Add(1)
		return "vault answered", nil
	})
	wl := newWorkload(t, "vault", "vault-api", "", count)
	_, port, _ := net.SplitHostPort(wl.srv.Listener.Addr().String())
	s := wl.reg.Specs()[0]
	base := "http://" + aliasHost + ":" + port
	tools := []spec.TableTool{{
		Name: "alias_count", SourceName: s.Name, Description: s.Description, InputSchema: s.InputSchema,
		ToolSet:   spec.ObjectReference{Namespace: "crm", Name: "alias"},
		Endpoints: &spec.Endpoints{Invoke: base + spec.InvokePrefix + s.Name, MCP: base + spec.MCPPath},
	}}
	o.Resolver = d.resolver()
	g, url := newGateway(t, nil, o)
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	return connect(t, url+"/mcp", eras[0], nil, nil), &calls
}

func aliasRecords() []rr {
	return []rr{
		{typ: dnsmessage.TypeCNAME, owner: aliasHost, target: vaultHost},
		{typ: dnsmessage.TypeA, owner: vaultHost, ip: net.IPv4(127, 0, 0, 1)},
	}
}

// Found by the red team: a check (LookupCNAME) and a dial that resolve the
// name apart let a Service made an ExternalName between the two (CoreDNS
// answers from its informer as soon as the Service changes) pass the check,
// and the dial follow the CNAME to the other namespace, on a connection then
// pooled and reused. The gateway dials the addresses of the one lookup it
// checked: the first call finds the plain Service's address (where nothing
// listens), and the later ones the alias, refused.
func TestAServiceMadeAnAliasWhileTheGatewayConnectsIsNotCalled(t *testing.T) {
	d := newFakeDNS(t, func(q dnsmessage.Question, n int) ([]rr, time.Duration) {
		if n < 3 { // the check's A, AAAA and CNAME queries: still a ClusterIP Service
			if q.Type == dnsmessage.TypeA {
				return []rr{{typ: dnsmessage.TypeA, owner: aliasHost, ip: net.IPv4(127, 0, 0, 3)}}, 0
			}
			return []rr{}, 0
		}
		if q.Type == dnsmessage.TypeAAAA {
			return aliasRecords()[:1], 0
		}
		return aliasRecords(), 0
	})
	cs, calls := vaultSetup(t, d, gateway.Options{})
	for i := range 3 {
		res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "alias_count"})
		if err == nil && !res.IsError {
			t.Errorf("call %d through the alias reached vault: %q", i, text(res))
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("vault's workload saw %d calls from crm's tool (DNS queries: %s)", n, d.queries())
	}
}

// Found by the red team: LookupCNAME reports the owner of the first record
// of whichever of its concurrent A, AAAA and CNAME replies arrives first. An
// AAAA reply that still shows the plain Service (a dual-stack cluster;
// CoreDNS caches each type apart) arriving before the A reply that shows
// the alias passed that check. The gateway looks at every reply.
func TestAnAliasInAnyReplyOfTheLookupIsRefused(t *testing.T) {
	d := newFakeDNS(t, func(q dnsmessage.Question, n int) ([]rr, time.Duration) {
		switch q.Type {
		case dnsmessage.TypeAAAA:
			return []rr{{typ: dnsmessage.TypeAAAA, owner: aliasHost, ip: net.IPv6loopback}}, 0
		case dnsmessage.TypeCNAME:
			return aliasRecords()[:1], 200 * time.Millisecond
		default:
			return aliasRecords(), 200 * time.Millisecond
		}
	})
	cs, calls := vaultSetup(t, d, gateway.Options{})
	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "alias_count"})
	if err == nil && !res.IsError {
		t.Errorf("the call through the alias reached vault: %q", text(res))
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("vault's workload saw %d calls from crm's tool (DNS queries: %s)", n, d.queries())
	}
}

// An ExternalName Service is a CNAME to any host, another namespace's
// Service included. The operator publishes no endpoints for one once it has
// seen it, but a Service made an alias after its tools were published stays
// in the table until the operator's next write reaches the gateway. The
// gateway looks every Service name up before it connects, and sends no call
// through an alias, whatever the order of events.
func TestTheGatewayCallsNoServiceThatIsAnAlias(t *testing.T) {
	var aliased atomic.Bool
	aliased.Store(true)
	d := newFakeDNS(t, func(q dnsmessage.Question, _ int) ([]rr, time.Duration) {
		if q.Type != dnsmessage.TypeA {
			return []rr{}, 0
		}
		if aliased.Load() {
			return aliasRecords(), 0
		}
		return []rr{{typ: dnsmessage.TypeA, owner: aliasHost, ip: net.IPv4(127, 0, 0, 1)}}, 0
	})
	cs, calls := vaultSetup(t, d, gateway.Options{})

	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "alias_count"})
	if err == nil && !res.IsError {
		t.Fatalf("a call through an ExternalName Service went through: %s", text(res))
	}
	msg := text(res)
	if err != nil {
		msg = err.Error()
	}
	if !strings.Contains(msg, "alias of "+vaultHost) {
		t.Errorf("the refusal says %q, want it to name the alias's target", msg)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the workload saw %d calls through the alias", n)
	}

	// The Service made a plain one again (its address, in this test, is
	// the workload's too) is called again.
	aliased.Store(false)
	res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "alias_count"})
	if err != nil || res.IsError {
		t.Fatalf("a call through the Service, no longer an alias: %v %s", err, text(res))
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the workload saw %d calls, want 1", n)
	}
}
