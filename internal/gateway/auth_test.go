package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// fakeAPI stands in for the API server's TokenReviews and
// SubjectAccessReviews, with RBAC's rule (a grant on every namespace, on
// every tool of a namespace, or on one tool), and counts them.
type fakeAPI struct {
	*fake.Clientset
	tokenReviews, accessReviews atomic.Int64

	mu     sync.Mutex
	tokens map[string]authenticationv1.UserInfo
	grants map[string]map[[2]string]bool // username → {namespace, name}
	extras []map[string]authorizationv1.ExtraValue
	n      int
}

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{Clientset: fake.NewClientset(), tokens: map[string]authenticationv1.UserInfo{}, grants: map[string]map[[2]string]bool{}}
	f.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		f.mu.Lock()
		u, ok := f.tokens[tr.Spec.Token]
		f.mu.Unlock()
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: u, Audiences: tr.Spec.Audiences}
		return true, tr, nil
	})
	f.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accessReviews.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		f.mu.Lock()
		g := f.grants[sar.Spec.User]
		sar.Status.Allowed = g[[2]string{"", ""}] || g[[2]string{ra.Namespace, ""}] || g[[2]string{ra.Namespace, ra.Name}]
		if len(f.extras) < 8 {
			f.extras = append(f.extras, sar.Spec.Extra)
		}
		f.mu.Unlock()
		return true, sar, nil
	})
	return f
}

func saUser(sa string) string { return "system:serviceaccount:agents:" + sa }

// token returns a new token of ServiceAccount agents/sa: the same user,
// uid and groups as every other token of it, and a credential id of its
// own, as the API server's TokenReview describes a bound token. extra adds
// keys.
func (f *fakeAPI) token(sa string, extra ...string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	tok := fmt.Sprintf("token-%s-%d", sa, f.n)
	u := authenticationv1.UserInfo{
		Username: saUser(sa), UID: "uid-" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:agents", "system:authenticated"},
		Extra:  map[string]authenticationv1.ExtraValue{gateway.CredentialIDKey: {"JTI=" + strconv.Itoa(f.n)}},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		u.Extra[extra[i]] = authenticationv1.ExtraValue{extra[i+1]}
	}
	f.tokens[tok] = u
	return tok
}

func (f *fakeAPI) grant(sa, namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.grants[saUser(sa)] == nil {
		f.grants[saUser(sa)] = map[[2]string]bool{}
	}
	f.grants[saUser(sa)][[2]string{namespace, name}] = true
}

// authGateway serves tbl with KubernetesAuth over f.
func authGateway(t testing.TB, f *fakeAPI, tbl *spec.Table, opts gateway.Options) string {
	t.Helper()
	opts.Auth = &gateway.KubernetesAuth{Client: f}
	g, url := newGateway(t, nil, opts)
	if err := g.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	return url
}

type tableReply struct {
	status int
	etag   string
	table  *spec.Table
	body   []byte
}

func getTable(t testing.TB, url, tok, etag string, gz bool) tableReply {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t), http.MethodGet, url+gateway.TablePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	out := tableReply{status: resp.StatusCode, etag: resp.Header.Get("ETag"), body: b}
	if resp.StatusCode == http.StatusOK {
		out.table = &spec.Table{}
		if err := json.Unmarshal(b, out.table); err != nil {
			t.Fatalf("%v: %.200s", err, b)
		}
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Error("a 503 without Retry-After")
	}
	return out
}

// getWholeTable gets GET /v1/tools until it is not 503 (the budget), and
// returns it with the requests it took.
func getWholeTable(t testing.TB, url, tok string) (tableReply, int) {
	t.Helper()
	for n := 1; n <= 100; n++ {
		r := getTable(t, url, tok, "", false)
		if r.status != http.StatusServiceUnavailable {
			return r, n
		}
	}
	t.Fatal("GET /v1/tools never completes")
	return tableReply{}, 0
}

func TestTableUnderAuthIsExactlyWhatTheCallerMayCall(t *testing.T) {
	f := newFakeAPI()
	tbl := bigTable(200)
	url := authGateway(t, f, tbl, gateway.Options{})
	one, ns, all, none := f.token("one"), f.token("ns"), f.token("all"), f.token("none")
	f.grant("one", tbl.Tools[7].ToolSet.Namespace, tbl.Tools[7].Name)
	f.grant("ns", "team-03", "")
	f.grant("all", "", "")

	filter := func(keep func(tt spec.TableTool) bool) *spec.Table {
		var tools []spec.TableTool
		for _, tt := range tbl.Tools {
			if keep(tt) {
				tools = append(tools, tt)
			}
		}
		if tools == nil {
			tools = []spec.TableTool{}
		}
		return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}
	}
	for _, tc := range []struct {
		tok  string
		want *spec.Table
	}{
		{one, filter(func(tt spec.TableTool) bool { return tt.Name == tbl.Tools[7].Name })},
		{ns, filter(func(tt spec.TableTool) bool { return tt.ToolSet.Namespace == "team-03" })},
		{all, tbl},
		{none, filter(func(spec.TableTool) bool { return false })},
	} {
		want, err := json.Marshal(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		for _, gz := range []bool{false, true} {
			r := getTable(t, url, tc.tok, "", gz)
			if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
				t.Fatalf("%s (gzip %v): %d, want the table of %d tools, byte for byte:\n%.300s", tc.tok, gz, r.status, len(tc.want.Tools), r.body)
			}
			if r.etag != spec.ETag(tc.want.Revision) {
				t.Errorf("%s: ETag %s, want %s", tc.tok, r.etag, spec.ETag(tc.want.Revision))
			}
		}
	}
}

func TestSecondTokenOfAServiceAccountIsServedFromCache(t *testing.T) {
	f := newFakeAPI()
	tbl := bigTable(500)
	url := authGateway(t, f, tbl, gateway.Options{})
	f.grant("agent", tbl.Tools[7].ToolSet.Namespace, tbl.Tools[7].Name)

	first := getTable(t, url, f.token("agent"), "", false)
	if first.status != http.StatusOK || len(first.table.Tools) != 1 {
		t.Fatalf("%d %s", first.status, first.body)
	}
	reviews := f.accessReviews.Load()
	// 1 question on every namespace, 50 on each, 500 on each tool.
	if reviews != 1+50+500 {
		t.Errorf("%d SubjectAccessReviews for a cold caller, want 551", reviews)
	}

	second := f.token("agent")
	r := getTable(t, url, second, "", false)
	if r.status != http.StatusOK || r.etag != first.etag {
		t.Fatalf("%d %s", r.status, r.etag)
	}
	r = getTable(t, url, second, first.etag, false)
	if r.status != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", r.status)
	}
	if _, err := newMCPCall(t, url, second, tbl.Tools[7].Name); err != nil {
		t.Fatal(err)
	}
	if n := f.accessReviews.Load() - reviews; n != 0 {
		t.Errorf("a second token of the ServiceAccount caused %d SubjectAccessReviews, want 0", n)
	}
	if n := f.tokenReviews.Load(); n != 2 {
		t.Errorf("%d TokenReviews, want one per token: 2", n)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.extras {
		if _, ok := e[gateway.CredentialIDKey]; ok {
			t.Fatalf("a SubjectAccessReview carried the credential id: %v", e)
		}
	}
}

// newMCPCall calls tool through /mcp as tok, and returns the error of the
// call (nil for a tool that is unknown to the workload but authorized: the
// gateway has no route in these tests, so it answers isError).
func newMCPCall(t testing.TB, url, tok, tool string) (*mcp.CallToolResult, error) {
	t.Helper()
	cs := connect(t, url+"/mcp", "2026-07-28", nil, &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tok}})
	return cs.CallTool(bounded(t), &mcp.CallToolParams{Name: tool})
}

func TestBoundAccessExtraSplitsTheCacheButTheCredentialIDDoesNot(t *testing.T) {
	f := newFakeAPI()
	tbl := bigTable(100)
	url := authGateway(t, f, tbl, gateway.Options{})
	f.grant("agent", "", "")
	const pod = "authentication.kubernetes.io/pod-uid"
	getTable(t, url, f.token("agent", pod, "pod-a"), "", false)
	getTable(t, url, f.token("agent", pod, "pod-a"), "", false)
	if n := f.accessReviews.Load(); n != 1 {
		t.Errorf("two tokens of one Pod: %d SubjectAccessReviews, want 1", n)
	}
	getTable(t, url, f.token("agent", pod, "pod-b"), "", false)
	if n := f.accessReviews.Load(); n != 2 {
		t.Errorf("a token of another Pod: %d SubjectAccessReviews in all, want 2", n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.extras[1][pod]; !slices.Equal(got, []string{"pod-b"}) {
		t.Errorf("the review carried %s %v, want pod-b", pod, got)
	}
}

func TestTableUnderAuthIsBoundedInReviewsPerRequest(t *testing.T) {
	f := newFakeAPI()
	tbl := bigTable(5000)
	url := authGateway(t, f, tbl, gateway.Options{})
	f.grant("agent", tbl.Tools[7].ToolSet.Namespace, tbl.Tools[7].Name)
	tok := f.token("agent")
	var last int64
	for n := 1; ; n++ {
		r := getTable(t, url, tok, "", false)
		now := f.accessReviews.Load()
		if now-last > gateway.DefaultMaxReviewsPerRequest {
			t.Fatalf("request %d caused %d SubjectAccessReviews, more than the bound %d", n, now-last, gateway.DefaultMaxReviewsPerRequest)
		}
		last = now
		if r.status == http.StatusOK {
			if len(r.table.Tools) != 1 || r.table.Tools[0].Name != tbl.Tools[7].Name {
				t.Fatalf("got %v", names(r.table))
			}
			if now != 1+50+5000 {
				t.Errorf("%d reviews in all, want each question once: 5051", now)
			}
			if n != 6 {
				t.Errorf("%d requests, want 6 (5051 questions, at most 1000 a request)", n)
			}
			return
		}
		if r.status != http.StatusServiceUnavailable || n > 10 {
			t.Fatalf("request %d: %d %s", n, r.status, r.body)
		}
	}
}

func TestConcurrentFreshTokensAskEachQuestionOnce(t *testing.T) {
	f := newFakeAPI()
	tbl := bigTable(800)
	url := authGateway(t, f, tbl, gateway.Options{})
	f.grant("agent", tbl.Tools[7].ToolSet.Namespace, tbl.Tools[7].Name)
	var wg sync.WaitGroup
	for range 10 {
		tok := f.token("agent")
		wg.Go(func() {
			if r, _ := getWholeTable(t, url, tok); r.status != http.StatusOK || len(r.table.Tools) != 1 {
				t.Errorf("%d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if n := f.accessReviews.Load(); n != 1+50+800 {
		t.Errorf("10 concurrent fresh tokens of one ServiceAccount: %d SubjectAccessReviews, want each question once: 851", n)
	}
}

func TestListPagesUnderAuthAreBoundedInReviews(t *testing.T) {
	f := newFakeAPI()
	tbl := bigTable(1200)
	routes := new(routes)
	opts := gateway.Options{PageSize: 100, MaxReviewsPerRequest: 150, DialContext: routes.dial}
	url := authGateway(t, f, tbl, opts)
	f.grant("agent", "team-07", "")
	f.grant("agent", tbl.Tools[11].ToolSet.Namespace, tbl.Tools[11].Name)
	var want []string
	for _, tt := range tbl.Tools {
		if tt.ToolSet.Namespace == "team-07" || tt.Name == tbl.Tools[11].Name {
			want = append(want, tt.Name)
		}
	}
	cs := connect(t, url+"/mcp", "2026-07-28", nil, &http.Client{Transport: headerTransport{"Authorization": "Bearer " + f.token("agent")}})
	var (
		got    []string
		cursor string
		last   int64
	)
	for pages := 1; ; pages++ {
		res, err := cs.ListTools(bounded(t), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		now := f.accessReviews.Load()
		if now-last > 150 {
			t.Fatalf("page %d caused %d SubjectAccessReviews, more than the bound 150", pages, now-last)
		}
		last = now
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
		if pages > 100 {
			t.Fatal("tools/list does not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d tools, want %d: %v", len(got), len(want), got)
	}
	// Warm: the same list asks nothing.
	before := f.accessReviews.Load()
	if names, _ := listAll(t, cs); !slices.Equal(names, want) {
		t.Errorf("warm: %v", names)
	}
	if n := f.accessReviews.Load() - before; n != 0 {
		t.Errorf("a warm list caused %d SubjectAccessReviews", n)
	}
}

// BenchmarkTableUnderAuth gets GET /v1/tools under --auth=kubernetes from a
// table of 5,000 tools in 50 namespaces, as a ServiceAccount granted one
// tool, against a counting fake of the API server, with no auth as the
// baseline in the same run:
//
//	go test -run '^$' -bench BenchmarkTableUnderAuth -benchtime 20x ./internal/gateway/
//
// reviews/op is the SubjectAccessReviews one request causes: at most
// DefaultMaxReviewsPerRequest (1,000) for a cold caller, whose first table
// takes requests/table requests (1 + 50 + 5,000 questions, each asked
// once); 0 for a warm caller, for a poll answered 304, and for a second
// token of the same ServiceAccount. cold-unbounded is the baseline: one
// cold request without the bound asks all 5,051 at once.
func BenchmarkTableUnderAuth(b *testing.B) {
	tbl := bigTable(5000)
	granted := tbl.Tools[7]

	b.Run("no-auth", func(b *testing.B) {
		g, url := newGateway(b, nil, gateway.Options{})
		if err := g.SetTable(tbl); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if r := getTable(b, url, "", "", true); r.status != http.StatusOK {
				b.Fatal(r.status)
			}
		}
	})

	setup := func(b *testing.B) (*fakeAPI, string) {
		f := newFakeAPI()
		url := authGateway(b, f, tbl, gateway.Options{})
		return f, url
	}
	b.Run("cold", func(b *testing.B) {
		f, url := setup(b)
		var reviews, requests int64
		sa := 0
		for b.Loop() {
			// A ServiceAccount never seen: every question is new.
			sa++
			name := fmt.Sprintf("cold-%d", sa)
			f.grant(name, granted.ToolSet.Namespace, granted.Name)
			tok := f.token(name)
			before := f.accessReviews.Load()
			r := getTable(b, url, tok, "", true)
			if n := f.accessReviews.Load() - before; n > gateway.DefaultMaxReviewsPerRequest {
				b.Fatalf("%d reviews in one request", n)
			}
			reviews += f.accessReviews.Load() - before
			requests++
			if r.status != http.StatusServiceUnavailable {
				b.Fatalf("a cold caller of 5,000 tools: %d, want 503 at the bound", r.status)
			}
			// The rest of its first table, outside the measure.
			b.StopTimer()
			_, n := getWholeTable(b, url, tok)
			b.ReportMetric(float64(n+1), "requests/table")
			b.StartTimer()
		}
		b.ReportMetric(float64(reviews)/float64(requests), "reviews/op")
	})
	b.Run("cold-unbounded", func(b *testing.B) {
		// The baseline of the bound: what one cold request asks without it.
		f := newFakeAPI()
		url := authGateway(b, f, tbl, gateway.Options{MaxReviewsPerRequest: 1 << 30})
		var reviews int64
		sa := 0
		for b.Loop() {
			sa++
			name := fmt.Sprintf("cold-%d", sa)
			f.grant(name, granted.ToolSet.Namespace, granted.Name)
			before := f.accessReviews.Load()
			if r := getTable(b, url, f.token(name), "", true); r.status != http.StatusOK || len(r.table.Tools) != 1 {
				b.Fatal(r.status)
			}
			reviews += f.accessReviews.Load() - before
		}
		b.ReportMetric(float64(reviews)/float64(b.N), "reviews/op")
	})
	b.Run("warm", func(b *testing.B) {
		f, url := setup(b)
		f.grant("warm", granted.ToolSet.Namespace, granted.Name)
		tok := f.token("warm")
		if r, _ := getWholeTable(b, url, tok); r.status != http.StatusOK || len(r.table.Tools) != 1 {
			b.Fatal(r.status)
		}
		before := f.accessReviews.Load()
		for b.Loop() {
			if r := getTable(b, url, tok, "", true); r.status != http.StatusOK || len(r.table.Tools) != 1 {
				b.Fatal(r.status)
			}
		}
		b.ReportMetric(float64(f.accessReviews.Load()-before)/float64(b.N), "reviews/op")
	})
	b.Run("warm-304", func(b *testing.B) {
		f, url := setup(b)
		f.grant("poll", granted.ToolSet.Namespace, granted.Name)
		tok := f.token("poll")
		r, _ := getWholeTable(b, url, tok)
		before := f.accessReviews.Load()
		for b.Loop() {
			if r := getTable(b, url, tok, r.etag, true); r.status != http.StatusNotModified {
				b.Fatal(r.status)
			}
		}
		b.ReportMetric(float64(f.accessReviews.Load()-before)/float64(b.N), "reviews/op")
	})
	b.Run("second-token", func(b *testing.B) {
		f, url := setup(b)
		f.grant("agent", granted.ToolSet.Namespace, granted.Name)
		if r, _ := getWholeTable(b, url, f.token("agent")); r.status != http.StatusOK {
			b.Fatal(r.status)
		}
		before := f.accessReviews.Load()
		for b.Loop() {
			// A token never seen, of the ServiceAccount already asked for.
			if r := getTable(b, url, f.token("agent"), "", true); r.status != http.StatusOK || len(r.table.Tools) != 1 {
				b.Fatal(r.status)
			}
		}
		b.ReportMetric(float64(f.accessReviews.Load()-before)/float64(b.N), "reviews/op")
	})
}

func TestTokensTooLongOrForgedAreRefusedWithinBounds(t *testing.T) {
	f := newFakeAPI()
	url := authGateway(t, f, bigTable(10), gateway.Options{})
	for _, tok := range []string{string(bytes.Repeat([]byte("x"), 17<<10)), "forged", "forged"} {
		if r := getTable(t, url, tok, "", false); r.status != http.StatusUnauthorized {
			t.Errorf("a token of %d bytes: %d, want 401", len(tok), r.status)
		}
	}
	// The long one is never sent; the forged one once, then its refusal
	// is kept.
	if n := f.tokenReviews.Load(); n != 1 {
		t.Errorf("%d TokenReviews, want 1", n)
	}
}

// slowAuth grants nothing, slowly, and records the most questions it was
// asked at once.
type slowAuth struct {
	now, peak atomic.Int64
}

func (a *slowAuth) Authenticate(_ context.Context, tok string) (*gateway.Caller, error) {
	return &gateway.Caller{User: tok}, nil
}

func (a *slowAuth) Allowed(context.Context, *gateway.Caller, string, string) (bool, error) {
	n := a.now.Add(1)
	defer a.now.Add(-1)
	for p := a.peak.Load(); n > p && !a.peak.CompareAndSwap(p, n); p = a.peak.Load() {
	}
	time.Sleep(2 * time.Millisecond)
	return false, nil
}

// Many concurrent cold requests wait for a question slot in their own
// goroutine: the questions in flight across the gateway stay bounded, not
// 16 for each request.
func TestQuestionsInFlightAreBoundedAcrossRequests(t *testing.T) {
	a := &slowAuth{}
	g, url := newGateway(t, nil, gateway.Options{Auth: a, MaxReviewsPerRequest: 200})
	if err := g.SetTable(bigTable(500)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			r := getTable(t, url, fmt.Sprintf("caller-%d", i), "", false)
			if r.status != http.StatusServiceUnavailable {
				t.Errorf("a cold caller of 500 tools with a budget of 200: %d, want 503", r.status)
			}
		})
	}
	wg.Wait()
	if p := a.peak.Load(); p > 128 || p < 17 {
		t.Errorf("%d questions in flight at once across 40 requests, want more than one request's 16 and at most 128", p)
	}
}
