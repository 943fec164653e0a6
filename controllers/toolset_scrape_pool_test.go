package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// connCounts counts the connections clients open to servers, and those
// still open.
type connCounts struct{ opened, open atomic.Int64 }

// countingServers start n servers of body, one per Pod, and count the
// connections clients open to them.
func countingServers(t testing.TB, n int, tlsOn bool, body []byte) ([]*httptest.Server, *connCounts) {
	t.Helper()
	counts := new(connCounts)
	var srvs []*httptest.Server
	for range n {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(body)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				counts.opened.Add(1)
				counts.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				counts.open.Add(-1)
			}
		}
		if tlsOn {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		srvs = append(srvs, srv)
	}
	return srvs, counts
}

// loopbackPods returns a Pod for each server, on loopback, with the
// server's port as its container port named "http": each Pod is a host of
// its own, as Pods are.
func loopbackPods(t testing.TB, srvs ...*httptest.Server) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i, srv := range srvs {
		_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
		port, _ := strconv.Atoi(p)
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + strconv.Itoa(i), UID: types.UID("uid-" + strconv.Itoa(i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "tools", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
			}}},
			Status: corev1.PodStatus{PodIP: "127.0.0.1"},
		})
	}
	return pods
}

func scrapeRound(t testing.TB, s *scraper, tgt scrapeTarget, pods []*corev1.Pod) {
	t.Helper()
	for _, res := range s.scrapeAll(context.Background(), tgt, pods, nil) {
		if res.err != nil {
			t.Fatalf("pod %s: %v", res.pod.Name, res.err)
		}
	}
}

func httpTarget(name string) scrapeTarget {
	return scrapeTarget{
		toolSet: types.NamespacedName{Namespace: "ns", Name: name}, namespace: "ns",
		spec:    &v1alpha1.ToolSetSpec{Port: intstr.FromString("http"), Path: spec.DefaultPath, Scheme: "http"},
		timeout: 10 * time.Second, interval: 30 * time.Second,
	}
}

// eventuallyOpen waits for the servers to see want connections open.
func eventuallyOpen(t *testing.T, conns *connCounts, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for conns.open.Load() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := conns.open.Load(); got != want {
		t.Errorf("%d connections open, want %d", got, want)
	}
}

// TestScrapesKeepTheirConnections scrapes two Pods round after round: every
// round after the first reuses the connections of the one before, through
// the ToolSet's one client; another ToolSet has connections of its own, and
// a ToolSet that goes closes its own.
func TestScrapesKeepTheirConnections(t *testing.T) {
	srvs, conns := countingServers(t, 2, false, encodeDoc(t, tool("a")))
	pods := loopbackPods(t, srvs...)
	s := newScraper(4, 0)
	tgt := httpTarget("ts")
	first := s.clientFor(tgt, len(pods))
	for range 5 {
		scrapeRound(t, s, tgt, pods)
	}
	if s.clientFor(tgt, len(pods)) != first {
		t.Error("the ToolSet's client was rebuilt with its settings unchanged")
	}
	if got := conns.opened.Load(); got != 2 {
		t.Errorf("5 rounds of 2 Pods opened %d connections, want 2", got)
	}

	other := httpTarget("other")
	scrapeRound(t, s, other, pods)
	scrapeRound(t, s, other, pods)
	if got := conns.opened.Load(); got != 4 {
		t.Errorf("with a second ToolSet: %d connections in all, want 4", got)
	}
	if s.reserved != 4 {
		t.Errorf("the clients reserve %d idle connections, want 4", s.reserved)
	}

	// A longer timeout builds a new client, whose first round connects anew.
	tgt.timeout = 20 * time.Second
	if s.clientFor(tgt, len(pods)) == first {
		t.Error("a new timeout kept the client")
	}
	scrapeRound(t, s, tgt, pods)
	if got := conns.opened.Load(); got != 6 {
		t.Errorf("after the timeout changed: %d connections, want 6", got)
	}

	s.forget(tgt.toolSet)
	s.forget(other.toolSet)
	if len(s.clients) != 0 {
		t.Errorf("%d clients kept after every ToolSet went", len(s.clients))
	}
	eventuallyOpen(t, conns, 0)
	if s.reserved != 0 {
		t.Errorf("%d idle connections still reserved after every ToolSet went", s.reserved)
	}
}

// TestScrapeConnectionsStayWithinTheBound keeps at most the manager-wide
// bound of idle connections between rounds: the ToolSets whose clients were
// built first keep one per Pod, the next one what is left, the others none.
func TestScrapeConnectionsStayWithinTheBound(t *testing.T) {
	srvs, conns := countingServers(t, 3, false, encodeDoc(t, tool("a")))
	pods := loopbackPods(t, srvs...)
	s := newScraper(4, 0)
	s.idle = 4
	first, second, third := httpTarget("first"), httpTarget("second"), httpTarget("third")
	for range 3 {
		for _, tgt := range []scrapeTarget{first, second, third} {
			scrapeRound(t, s, tgt, pods)
		}
	}
	// first keeps 3, second 1 of its 3 Pods' connections, third none.
	eventuallyOpen(t, conns, 4)
	if got := conns.opened.Load(); got != 3+(3+2+2)+(3*3) {
		t.Errorf("3 rounds of 3 ToolSets of 3 Pods opened %d connections, want %d", got, 3+(3+2+2)+(3*3))
	}

	// A ToolSet that goes hands its reservation to the next client built.
	s.forget(first.toolSet)
	eventuallyOpen(t, conns, 1)
	s.forget(third.toolSet)
	for range 2 {
		scrapeRound(t, s, third, pods)
	}
	eventuallyOpen(t, conns, 4)
	if s.reserved != 4 {
		t.Errorf("%d idle connections reserved, want the bound 4", s.reserved)
	}
}

// TestScrapeClientIsRebuiltWhenTLSChanges keeps a ToolSet's TLS connections
// from round to round while its TLS settings stay, and drops them when the CA
// bundle changes: a connection verified under one bundle is never used
// under another. Another ToolSet scraping the same Pods has connections of
// its own.
func TestScrapeClientIsRebuiltWhenTLSChanges(t *testing.T) {
	srvs, conns := countingServers(t, 2, true, encodeDoc(t, tool("a")))
	pods := loopbackPods(t, srvs...)
	pool := x509.NewCertPool()
	pool.AddCert(srvs[0].Certificate())
	creds := func(bundle string) *credentials.Credentials {
		return &credentials.Credentials{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, TLSKey: "https:" + bundle}
	}
	s := newScraper(4, 0)
	tgt := scrapeTarget{
		toolSet: types.NamespacedName{Namespace: "ns", Name: "ts"}, namespace: "ns",
		spec:    &v1alpha1.ToolSetSpec{Port: intstr.FromString("http"), Path: spec.DefaultPath, Scheme: "https"},
		timeout: 10 * time.Second, interval: 30 * time.Second, creds: creds("one"),
	}
	scrapeRound(t, s, tgt, pods)
	first := s.clientFor(tgt, len(pods))
	scrapeRound(t, s, tgt, pods)
	if got := conns.opened.Load(); got != 2 {
		t.Errorf("2 rounds of 2 Pods opened %d connections, want 2", got)
	}

	// Settings are read anew each round: equal ones keep the client.
	tgt.creds = creds("one")
	if s.clientFor(tgt, len(pods)) != first {
		t.Error("equal TLS settings built a new client")
	}
	tgt.creds = creds("two")
	if s.clientFor(tgt, len(pods)) == first {
		t.Fatal("a new CA bundle kept the client")
	}
	scrapeRound(t, s, tgt, pods)
	if got := conns.opened.Load(); got != 4 {
		t.Errorf("after the CA bundle changed: %d connections, want 4", got)
	}
	other := tgt
	other.toolSet.Name = "other"
	scrapeRound(t, s, other, pods)
	scrapeRound(t, s, other, pods)
	if got := conns.opened.Load(); got != 6 {
		t.Errorf("after another ToolSet's 2 rounds: %d connections, want 6", got)
	}
}

func TestSelectorIndexValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  metav1.LabelSelector
		want []string
	}{
		{"the first matchLabel", metav1.LabelSelector{MatchLabels: map[string]string{"b": "2", "a": "1"}}, []string{"a=1"}},
		{"each value of an In expression", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
		}}, []string{"app=x", "app=y"}},
		{"any Pod otherwise", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}},
		}}, []string{anyPodLabel}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := selectorIndexValues(&v1alpha1.ToolSet{Spec: v1alpha1.ToolSetSpec{Selector: tc.sel}})
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// BenchmarkScrapeRound measures one steady round of a ToolSet of 4 Pods, each
// answering its conditional GET with 304: what every ToolSet costs the
// manager every interval.
//
//	go test ./controllers -run '^$' -bench BenchmarkScrapeRound -benchmem -count 6
func BenchmarkScrapeRound(b *testing.B) {
	body := encodeDoc(b, tool("a"), tool("b"))
	prev, err := ParseDocument(body)
	if err != nil {
		b.Fatal(err)
	}
	for _, scheme := range []string{"http", "https"} {
		b.Run(scheme, func(b *testing.B) {
			var srvs []*httptest.Server
			var creds *credentials.Credentials
			pool := x509.NewCertPool()
			for range 4 {
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("If-None-Match") == spec.ETag(prev.Revision) {
						w.WriteHeader(http.StatusNotModified)
						return
					}
					_, _ = w.Write(body)
				}))
				if scheme == "https" {
					srv.StartTLS()
					pool.AddCert(srv.Certificate())
					creds = &credentials.Credentials{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, TLSKey: "https:bench"}
				} else {
					srv.Start()
				}
				defer srv.Close()
				srvs = append(srvs, srv)
			}
			pods := loopbackPods(b, srvs...)
			last := map[types.UID]podDoc{}
			for i, p := range pods {
				last[p.UID] = podDoc{url: scheme + "://" + srvs[i].Listener.Addr().String() + spec.DefaultPath, doc: prev}
			}
			s := newScraper(32, 0)
			tgt := scrapeTarget{
				toolSet: types.NamespacedName{Namespace: "ns", Name: "ts"}, namespace: "ns",
				spec:    &v1alpha1.ToolSetSpec{Port: intstr.FromString("http"), Path: spec.DefaultPath, Scheme: scheme},
				timeout: 10 * time.Second, interval: 30 * time.Second, creds: creds,
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, res := range s.scrapeAll(context.Background(), tgt, pods, last) {
					if res.err != nil || res.doc != prev {
						b.Fatalf("pod %s: %v", res.pod.Name, res.err)
					}
				}
			}
		})
	}
}
