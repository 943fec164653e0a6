package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

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

// httpTargetIn is httpTarget of a ToolSet in namespace ns.
func httpTargetIn(ns, name string) scrapeTarget {
	t := httpTarget(name)
	t.toolSet.Namespace, t.namespace = ns, ns
	return t
}

// TestScrapesKeepTheirConnections scrapes two Pods round after round: every
// round after the first reuses the connections of the one before, through
// the pool of the ToolSet's namespace and settings; another ToolSet of the
// namespace that scrapes the same Pods reuses them too, one of another
// namespace has connections of its own, and a pool that no ToolSet uses
// closes its own.
func TestScrapesKeepTheirConnections(t *testing.T) {
	srvs, conns := countingServers(t, 2, false, encodeDoc(t, tool("a")))
	pods := loopbackPods(t, srvs...)
	s := newScraper(4, 0)
	tgt := httpTarget("ts")
	first := s.clientFor(tgt)
	for range 5 {
		scrapeRound(t, s, tgt, pods)
	}
	if s.clientFor(tgt) != first {
		t.Error("the ToolSet's client was rebuilt with its settings unchanged")
	}
	if got := conns.opened.Load(); got != 2 {
		t.Errorf("5 rounds of 2 Pods opened %d connections, want 2", got)
	}

	same := httpTarget("same")
	scrapeRound(t, s, same, pods)
	scrapeRound(t, s, same, pods)
	if got := conns.opened.Load(); got != 2 {
		t.Errorf("with a second ToolSet of the namespace: %d connections in all, want the first's 2", got)
	}
	other := httpTargetIn("other-ns", "other")
	scrapeRound(t, s, other, pods)
	scrapeRound(t, s, other, pods)
	if got := conns.opened.Load(); got != 4 {
		t.Errorf("with a ToolSet of another namespace: %d connections in all, want 4", got)
	}
	if s.reserved != 4 {
		t.Errorf("the pools reserve %d idle connections, want 4", s.reserved)
	}

	// A longer timeout moves the ToolSet to a new pool, whose first round
	// connects anew; the old one still serves the ToolSet left in it.
	tgt.timeout = 20 * time.Second
	if s.clientFor(tgt) == first {
		t.Error("a new timeout kept the client")
	}
	scrapeRound(t, s, tgt, pods)
	scrapeRound(t, s, same, pods)
	if got := conns.opened.Load(); got != 6 {
		t.Errorf("after the timeout changed: %d connections, want 6", got)
	}

	for _, ts := range []scrapeTarget{tgt, same, other} {
		s.forget(ts.toolSet)
	}
	if len(s.clients) != 0 || len(s.pools) != 0 {
		t.Errorf("%d clients and %d pools kept after every ToolSet went", len(s.clients), len(s.pools))
	}
	eventuallyOpen(t, conns, 0)
	if s.reserved != 0 {
		t.Errorf("%d idle connections still reserved after every ToolSet went", s.reserved)
	}
}

// TestScrapeConnectionsStayWithinTheBound keeps at most the manager-wide
// bound of idle connections between rounds: the pools whose addresses
// reserved first keep one per Pod, the next one what is left, the others
// none and connect anew each round.
func TestScrapeConnectionsStayWithinTheBound(t *testing.T) {
	srvs, conns := countingServers(t, 3, false, encodeDoc(t, tool("a")))
	pods := loopbackPods(t, srvs...)
	s := newScraper(4, 0)
	s.idle = 4
	// One namespace each: no two share a pool.
	first, second, third := httpTargetIn("a", "first"), httpTargetIn("b", "second"), httpTargetIn("c", "third")
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

	// A pool that goes hands its reservations to the addresses scraped
	// next.
	s.forget(first.toolSet)
	eventuallyOpen(t, conns, 1)
	for range 2 {
		scrapeRound(t, s, third, pods)
	}
	eventuallyOpen(t, conns, 4)
	if s.reserved != 4 {
		t.Errorf("%d idle connections reserved, want the bound 4", s.reserved)
	}
}

// TestScrapeReservationsExpire returns the reservation of an address no
// scrape used for its pool's idle timeout to the next address that needs
// one: Pods that went away do not hold the bound.
func TestScrapeReservationsExpire(t *testing.T) {
	s, conns, pods := boundOfOne(t)
	gone, next := httpTargetIn("a", "gone"), httpTargetIn("b", "next")
	scrapeRound(t, s, gone, pods[:1])
	for range 2 {
		scrapeRound(t, s, next, pods[1:])
	}
	if got := conns.opened.Load(); got != 3 {
		t.Fatalf("with the bound reserved: %d connections opened, want 3", got)
	}
	// The first Pod is not scraped again for longer than the idle timeout.
	ageReservations(s, gone, gone.idleTimeout())
	for range 3 {
		scrapeRound(t, s, next, pods[1:])
	}
	wantReserved(t, s, conns, 4, "after the first Pod's reservation expired")
}

// boundOfOne starts two Pods' servers, and a scraper whose idle bound is one
// connection.
func boundOfOne(t *testing.T) (*scraper, *connCounts, []*corev1.Pod) {
	srvs, conns := countingServers(t, 2, false, encodeDoc(t, tool("a")))
	pods := loopbackPods(t, srvs...)
	s := newScraper(4, 0)
	s.idle = 1
	return s, conns, pods
}

// ageReservations makes the addresses of t's pool look unscraped for d, and
// the last sweep of the bound as long ago.
func ageReservations(s *scraper, t scrapeTarget, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.clients[t.toolSet].hosts {
		h.used = h.used.Add(-d)
	}
	s.swept = time.Time{}
}

// wantReserved checks the connections opened so far, and that the bound,
// 1, is reserved.
func wantReserved(t *testing.T, s *scraper, conns *connCounts, opened int64, when string) {
	t.Helper()
	if got := conns.opened.Load(); got != opened {
		t.Errorf("%s: %d connections opened, want %d", when, got, opened)
	}
	if s.reserved != 1 {
		t.Errorf("%s: %d idle connections reserved, want the bound 1", when, s.reserved)
	}
}

// TestScrapeReservationsOfALongIntervalExpire: a ToolSet whose interval is
// days long holds its Pods' reservations no longer than maxIdleConnTimeout,
// not two intervals; another namespace's Pods get them then.
func TestScrapeReservationsOfALongIntervalExpire(t *testing.T) {
	s, conns, pods := boundOfOne(t)
	rare, next := httpTargetIn("a", "rare"), httpTargetIn("b", "next")
	rare.interval = 72 * time.Hour
	if got := rare.idleTimeout(); got != maxIdleConnTimeout {
		t.Errorf("idle timeout of a 72h interval: %s, want %s", got, maxIdleConnTimeout)
	}
	scrapeRound(t, s, rare, pods[:1])
	scrapeRound(t, s, next, pods[1:])
	// rare's Pod is not scraped again for maxIdleConnTimeout, a tiny part
	// of its interval.
	ageReservations(s, rare, maxIdleConnTimeout)
	for range 3 {
		scrapeRound(t, s, next, pods[1:])
	}
	// rare's connection, next's first (closed: the bound was rare's), and
	// the one next kept once rare's reservation expired; while rare held
	// it, next connected anew every round.
	wantReserved(t, s, conns, 3, "after the 72h ToolSet's reservation expired")
}

// TestScrapeClientIsRebuiltWhenTLSChanges keeps a ToolSet's TLS connections
// from round to round while its TLS settings stay, and drops them when the CA
// bundle changes: a connection verified under one bundle is never used
// under another.
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
	first := s.clientFor(tgt)
	scrapeRound(t, s, tgt, pods)
	if got := conns.opened.Load(); got != 2 {
		t.Errorf("2 rounds of 2 Pods opened %d connections, want 2", got)
	}

	// Settings are read anew each round: equal ones keep the client.
	tgt.creds = creds("one")
	if s.clientFor(tgt) != first {
		t.Error("equal TLS settings built a new client")
	}
	tgt.creds = creds("two")
	if s.clientFor(tgt) == first {
		t.Fatal("a new CA bundle kept the client")
	}
	longer := tgt
	longer.toolSet.Name, longer.timeout = "longer", 20*time.Second
	if s.clientFor(longer) == s.clientFor(tgt) {
		t.Error("ToolSets of another timeout share a client")
	}
	scrapeRound(t, s, tgt, pods)
	if got := conns.opened.Load(); got != 4 {
		t.Errorf("after the CA bundle changed: %d connections, want 4", got)
	}
	// Another ToolSet of the namespace with the same TLS settings reuses
	// the connections; one of another namespace has its own.
	same := tgt
	same.toolSet.Name = "same"
	scrapeRound(t, s, same, pods)
	if got := conns.opened.Load(); got != 4 {
		t.Errorf("after another ToolSet of the namespace: %d connections, want 4", got)
	}
	other := tgt
	other.toolSet, other.namespace = types.NamespacedName{Namespace: "other", Name: "ts"}, "other"
	scrapeRound(t, s, other, pods)
	scrapeRound(t, s, other, pods)
	if got := conns.opened.Load(); got != 6 {
		t.Errorf("after the 2 rounds of a ToolSet of another namespace: %d connections, want 6", got)
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
			var last podDocs
			for i, p := range pods {
				last = append(last, podDoc{uid: p.UID, url: scheme + "://" + srvs[i].Listener.Addr().String() + spec.DefaultPath, doc: prev})
			}
			slices.SortFunc(last, func(a, b podDoc) int { return comparePodUID(a, b.uid) })
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

// BenchmarkScrapeDials runs steady rounds of 5,000 ToolSets of one Pod each
// under the default bound of idle connections (1,024), 32 scrapes at a time,
// and reports the connections opened per round (dials/round) and the
// scraper's CPU per round:
//
//   - per-toolset-pools: every ToolSet in a namespace of its own, so that no
//     two share a pool: what every ToolSet's client of its own did before
//     pools were shared (the baseline, in the same run);
//
//   - bench-scale: 50 ToolSets per namespace, their Pods served by 4
//     addresses, the shape of make bench-scale at 5,000 ToolSets;
//
//   - distinct-pods: 1,100 ToolSets of 50 per namespace, each Pod an
//     address of its own: past the bound, the addresses that reserved
//     first keep their connections, the other 76 connect anew each round.
//
//     go test ./controllers -run '^$' -bench BenchmarkScrapeDials -count 6
func BenchmarkScrapeDials(b *testing.B) {
	body := encodeDoc(b, tool("a"))
	prev, err := ParseDocument(body)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name                     string
		toolSets, perNS, servers int
	}{
		{"per-toolset-pools", 5000, 1, 4},
		{"bench-scale", 5000, 50, 4},
		{"distinct-pods", 1100, 50, 1100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srvs, conns := notModifiedServers(b, bc.servers, prev)
			pods := loopbackPods(b, srvs...)
			s := newScraper(DefaultMaxConcurrentScrapes, 0)
			type toolSet struct {
				tgt  scrapeTarget
				pods []*corev1.Pod
				last podDocs
			}
			sets := make([]toolSet, bc.toolSets)
			for i := range sets {
				pod := pods[i%len(pods)].DeepCopy()
				pod.UID = types.UID("uid-" + strconv.Itoa(i))
				tgt := httpTargetIn("ns-"+strconv.Itoa(i/bc.perNS), "ts-"+strconv.Itoa(i))
				sets[i] = toolSet{tgt: tgt, pods: []*corev1.Pod{pod}, last: podDocs{
					{uid: pod.UID, url: "http://" + srvs[i%len(srvs)].Listener.Addr().String() + spec.DefaultPath, doc: prev},
				}}
			}
			round := func() {
				var g errgroup.Group
				g.SetLimit(DefaultMaxConcurrentScrapes)
				for _, ts := range sets {
					g.Go(func() error {
						for _, res := range s.scrapeAll(context.Background(), ts.tgt, ts.pods, ts.last) {
							if res.err != nil || res.doc != prev {
								return fmt.Errorf("pod %s: %w", res.pod.Name, res.err)
							}
						}
						return nil
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			round() // the first round connects
			opened := conns.opened.Load()
			cpu := startCPU()
			n := 0
			for b.Loop() {
				round()
				n++
			}
			b.ReportMetric(float64(cpu())/float64(n), "cpu-ns/round")
			b.ReportMetric(float64(conns.opened.Load()-opened)/float64(n), "dials/round")
			b.ReportMetric(float64(s.reserved), "reserved")
		})
	}
}

// notModifiedServers start n servers that answer a conditional GET of
// prev with 304, and count the connections clients open to them.
func notModifiedServers(b *testing.B, n int, prev *spec.Document) ([]*httptest.Server, *connCounts) {
	b.Helper()
	counts := new(connCounts)
	srvs := make([]*httptest.Server, n)
	for i := range srvs {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("If-None-Match") != spec.ETag(prev.Revision) {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusNotModified)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				counts.opened.Add(1)
			}
		}
		srv.Start()
		b.Cleanup(srv.Close)
		srvs[i] = srv
	}
	return srvs, counts
}

// startCPU returns a function that reports the CPU time the process used
// since startCPU was called, user and system: on a shared machine, wall
// time also counts the time other processes held the cores.
func startCPU() func() time.Duration {
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	return func() time.Duration { return used() - start }
}
