package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestBackendClientsAreKeptPerToolSetUntilTheirTLSChangesOrTheyLeaveTheTable:
// a ToolSet with TLS settings gets a client of its own, the same one while
// its settings stay (so its connections are reused), a new one when they
// change; ToolSets that leave the table are forgotten, token and client.
func TestBackendClientsAreKeptPerToolSetUntilTheirTLSChangesOrTheyLeaveTheTable(t *testing.T) {
	key := map[string]string{"a": "k1", "b": "k1", "c": ""}
	src := CredentialsFunc(func(_ context.Context, ref spec.ObjectReference) (*BackendCredentials, error) {
		if ref.Name == "c" {
			return &BackendCredentials{BearerToken: "tok"}, nil
		}
		return &BackendCredentials{TLS: &tls.Config{ServerName: ref.Name}, TLSKey: key[ref.Name]}, nil
	})
	base := newWorkloadClient(&Options{MaxConcurrentCalls: 4})
	bs := newBackends(src, -1, base) // every get reads again
	get := func(name string) *backend {
		t.Helper()
		b, err := bs.get(t.Context(), spec.ObjectReference{Namespace: "ns", Name: name}, "https://x.ns.svc.cluster.local/mcp")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a1 := get("a")
	if a1.client == nil || a1.client == base {
		t.Fatal("a ToolSet with TLS settings has no client of its own")
	}
	if tr := a1.client.Transport.(*http.Transport); tr.TLSClientConfig.ServerName != "a" || tr.MaxIdleConnsPerHost > backendIdleConns {
		t.Errorf("its transport: server name %q, %d idle per host", tr.TLSClientConfig.ServerName, tr.MaxIdleConnsPerHost)
	}
	if a2 := get("a"); a2.client != a1.client {
		t.Error("the same TLS settings built a new client")
	}
	key["a"] = "k2"
	if a3 := get("a"); a3.client == a1.client {
		t.Error("changed TLS settings kept the old client")
	}
	if b := get("b"); b.client == a1.client {
		t.Error("two ToolSets share a client")
	}
	if c := get("c"); c.client != nil || c.token != "tok" {
		t.Errorf("a ToolSet without TLS settings: client %v, token %q", c.client, c.token)
	}
	bs.retain(map[spec.ObjectReference][]int{{Namespace: "ns", Name: "b"}: nil})
	if len(bs.m) != 1 || bs.m[spec.ObjectReference{Namespace: "ns", Name: "b"}] == nil {
		t.Errorf("after the table kept only ns/b, %d ToolSets are kept", len(bs.m))
	}
}

// TestBackendClientsOfTheirOwnAreBoundedInCount: past maxTLS ToolSets with
// TLS settings, the one that expires first loses its client, and is read
// again on its next call.
func TestBackendClientsOfTheirOwnAreBoundedInCount(t *testing.T) {
	src := CredentialsFunc(func(_ context.Context, ref spec.ObjectReference) (*BackendCredentials, error) {
		return &BackendCredentials{TLS: &tls.Config{ServerName: ref.Name}, TLSKey: ref.Name}, nil
	})
	bs := newBackends(src, time.Hour, newWorkloadClient(&Options{MaxConcurrentCalls: 4}))
	bs.maxTLS = 3
	now := time.Unix(1000, 0)
	bs.now = func() time.Time { return now }
	for i := range 10 {
		now = now.Add(time.Second)
		if _, err := bs.get(t.Context(), spec.ObjectReference{Namespace: "ns", Name: fmt.Sprint("ts", i)}, "https://x/mcp"); err != nil {
			t.Fatal(err)
		}
	}
	clients := 0
	for _, e := range bs.m {
		if e.b != nil && e.b.client != nil {
			clients++
		}
	}
	if clients != 3 || bs.m[spec.ObjectReference{Namespace: "ns", Name: "ts9"}] == nil {
		t.Errorf("%d clients of their own kept, want the 3 newest", clients)
	}
}
