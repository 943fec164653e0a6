package gateway_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// clusterDNS stands in for the cluster's DNS server on loopback: a Service
// name answers with an address record, an ExternalName Service's with a
// CNAME to its target (and the target's address, as a resolver that
// follows it does).
type clusterDNS struct {
	mu    sync.Mutex
	a     map[string][4]byte
	cname map[string]string
	addr  string
}

func newClusterDNS(t *testing.T) *clusterDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	d := &clusterDNS{a: map[string][4]byte{}, cname: map[string]string{}, addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if msg := d.answer(buf[:n]); msg != nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return d
}

func (d *clusterDNS) setA(name string, ip [4]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.cname, name+".")
	d.a[name+"."] = ip
}

func (d *clusterDNS) setCNAME(name, target string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.a, name+".")
	d.cname[name+"."] = target + "."
}

func (d *clusterDNS) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	name := strings.ToLower(q.Name.String())
	target, alias := d.cname[name]
	ip, known := d.a[name]
	if alias {
		ip, known = d.a[target]
	}
	rcode := dnsmessage.RCodeSuccess
	if !alias && !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	owner := q.Name
	if alias {
		_ = b.CNAMEResource(dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 5},
			dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(target)})
		owner = dnsmessage.MustNewName(target)
	}
	if known && q.Type == dnsmessage.TypeA {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: ip})
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}

func (d *clusterDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", d.addr)
	}}
}

// An ExternalName Service is a CNAME to any host, another namespace's
// Service included. The operator publishes no endpoints for one once it has
// seen it, but a Service made an alias after its tools were published stays
// in the table until the operator's next write reaches the gateway. The
// gateway looks every Service name up before it connects, and sends no call
// through an alias, whatever the order of events.
func TestTheGatewayCallsNoServiceThatIsAnAlias(t *testing.T) {
	var calls atomic.Int32
	count := toolkit.MustNew("count", "Counts its calls", func(context.Context, struct{}) (string, error) {
		calls.Add(1)
		return "called", nil
	})
	wl := newWorkload(t, "crm", "tools", "", count)
	_, port, _ := net.SplitHostPort(wl.srv.Listener.Addr().String())

	dns := newClusterDNS(t)
	loopback := [4]byte{127, 0, 0, 1}
	dns.setA("tools.crm.svc.cluster.local", loopback)
	dns.setA("vault-api.vault.svc.cluster.local", loopback)
	dns.setCNAME("alias.crm.svc.cluster.local", "vault-api.vault.svc.cluster.local")

	var tools []spec.TableTool
	for _, svc := range []string{"tools", "alias"} {
		s := wl.reg.Specs()[0]
		base := "http://" + svc + ".crm.svc.cluster.local:" + port
		tools = append(tools, spec.TableTool{
			Name: svc + "_count", SourceName: s.Name, Description: s.Description, InputSchema: s.InputSchema,
			ToolSet:   spec.ObjectReference{Namespace: "crm", Name: svc},
			Endpoints: &spec.Endpoints{Invoke: base + spec.InvokePrefix + s.Name, MCP: base + spec.MCPPath},
		})
	}
	g, url := newGateway(t, nil, gateway.Options{Resolver: dns.resolver()})
	if err := g.SetTable(table(tools)); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url+"/mcp", eras[0], nil, nil)

	res, err := cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "tools_count"})
	if err != nil || res.IsError {
		t.Fatalf("a call through a Service of the namespace: %v %s", err, text(res))
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the workload saw %d requests, want 1", n)
	}

	res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "alias_count"})
	if err == nil && !res.IsError {
		t.Fatalf("a call through an ExternalName Service went through: %s", text(res))
	}
	msg := text(res)
	if err != nil {
		msg = err.Error()
	}
	if !strings.Contains(msg, "alias of vault-api.vault.svc.cluster.local") {
		t.Errorf("the refusal says %q, want it to name the alias's target", msg)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the workload saw %d requests, want still 1: the alias's call reached it", n)
	}

	// The Service made a plain one again is called again.
	dns.setA("alias.crm.svc.cluster.local", loopback)
	res, err = cs.CallTool(bounded(t), &mcp.CallToolParams{Name: "alias_count"})
	if err != nil || res.IsError {
		t.Fatalf("a call through the Service, no longer an alias: %v %s", err, text(res))
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the workload saw %d requests, want 2", n)
	}
}
