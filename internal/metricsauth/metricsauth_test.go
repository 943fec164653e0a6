package metricsauth_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/toolplane/toolplane/internal/metricsauth"
	"github.com/toolplane/toolplane/test/harness"
)

// reviews counts the reviews sent to the API server, and holds each
// TokenReview at gate while gate is set.
type reviews struct {
	tokens, access, inFlight, maxInFlight atomic.Int64
	mu                                    sync.Mutex
	gate                                  chan struct{}
}

func (rv *reviews) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
			rv.tokens.Add(1)
			n := rv.inFlight.Add(1)
			defer rv.inFlight.Add(-1)
			for {
				m := rv.maxInFlight.Load()
				if n <= m || rv.maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			rv.mu.Lock()
			gate := rv.gate
			rv.mu.Unlock()
			if gate != nil {
				<-gate
			}
		case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
			rv.access.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The filter against a real API server: who is refused and how, what is
// asked once, and what a flood of forged tokens can hold.
func TestFilter(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	prometheus, stranger := e.prometheus, e.stranger

	rv, cfg, httpClient := e.counted(t)
	f, err := metricsauth.New(cfg, httpClient, metricsauth.Options{})
	must(t, err)
	srv := httptest.NewServer(f.Wrap(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "the metrics")
	})))
	t.Cleanup(srv.Close)
	get := func(method, path, auth string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		must(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		must(t, err)
		return resp.StatusCode, string(body), resp.Header
	}
	expect := func(method, path, auth string, want int) string {
		t.Helper()
		code, body, _ := get(method, path, auth)
		if code != want {
			t.Fatalf("%s %s: %d %q, want %d", method, path, code, body, want)
		}
		if want != http.StatusOK && strings.Contains(body, "the metrics") {
			t.Fatalf("%s %s answered %d and served the metrics", method, path, code)
		}
		return body
	}

	t.Run("no token is 401 and asks nothing", func(t *testing.T) {
		for _, auth := range []string{"", "Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "Bearer " + strings.Repeat("x", 17<<10)} {
			code, _, h := get(http.MethodGet, "/metrics", auth)
			if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
				t.Errorf("Authorization %.20q: %d, WWW-Authenticate %q; want 401 with a challenge", auth, code, h.Get("WWW-Authenticate"))
			}
		}
		if n := rv.tokens.Load(); n != 0 {
			t.Errorf("%d TokenReviews for requests without a token to review", n)
		}
	})

	t.Run("a token the API server refuses is 401, reviewed once", func(t *testing.T) {
		before := rv.tokens.Load()
		for range 3 {
			expect(http.MethodGet, "/metrics", "Bearer not-a-token", http.StatusUnauthorized)
		}
		if n := rv.tokens.Load() - before; n != 1 {
			t.Errorf("%d TokenReviews of one refused token asked three times, want 1", n)
		}
	})

	t.Run("a ServiceAccount without the grant is 403", func(t *testing.T) {
		body := expect(http.MethodGet, "/metrics", "Bearer "+stranger, http.StatusForbidden)
		if !strings.Contains(body, "system:serviceaccount:monitoring:stranger") {
			t.Errorf("403 body %q does not name the user denied", body)
		}
	})

	t.Run("the grant serves get on /metrics, asked once, and nothing else", func(t *testing.T) {
		tokens, access := rv.tokens.Load(), rv.access.Load()
		for range 3 {
			if body := expect(http.MethodGet, "/metrics", "Bearer "+prometheus, http.StatusOK); body != "the metrics" {
				t.Fatalf("served %q", body)
			}
		}
		if n, m := rv.tokens.Load()-tokens, rv.access.Load()-access; n != 1 || m != 1 {
			t.Errorf("%d TokenReviews and %d SubjectAccessReviews for one scraper thrice, want 1 and 1", n, m)
		}
		tokens, access = rv.tokens.Load(), rv.access.Load()
		expect(http.MethodPost, "/metrics", "Bearer "+prometheus, http.StatusMethodNotAllowed)
		expect("GETX", "/metrics", "Bearer "+prometheus, http.StatusMethodNotAllowed)
		expect(http.MethodGet, "/debug/pprof/", "bearer "+prometheus, http.StatusNotFound)
		expect(http.MethodGet, "/metrics/", "Bearer "+prometheus, http.StatusNotFound)
		expect(http.MethodGet, "/"+strings.Repeat("m", 2<<10), "Bearer "+prometheus, http.StatusNotFound)
		if n, m := rv.tokens.Load()-tokens, rv.access.Load()-access; n != 0 || m != 0 {
			t.Errorf("%d TokenReviews and %d SubjectAccessReviews for methods and paths not served, want none", n, m)
		}
	})

	t.Run("forged tokens past the cache's bound do not drop a scraper's review", func(t *testing.T) {
		// Clients without a rate limit, so that thousands of reviews take
		// seconds: what is under test is the cache, not the limit.
		unlimited := rest.CopyConfig(cfg)
		unlimited.QPS = -1
		kube := kubernetes.NewForConfigOrDie(unlimited)
		f := metricsauth.NewWithClients(kube.AuthenticationV1().TokenReviews(), kube.AuthenticationV1().TokenReviews(), kube.AuthorizationV1().SubjectAccessReviews(), metricsauth.Options{})
		h := f.Wrap(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		serve := func(token string) int {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code
		}
		if code := serve(prometheus); code != http.StatusOK {
			t.Fatalf("the scraper: %d", code)
		}
		for i := range 3000 {
			if code := serve(fmt.Sprintf("forged-%d", i)); code != http.StatusUnauthorized {
				t.Fatalf("forged token %d: %d", i, code)
			}
		}
		before := rv.tokens.Load()
		if code := serve(prometheus); code != http.StatusOK {
			t.Fatalf("the scraper after the flood: %d", code)
		}
		if n := rv.tokens.Load() - before; n != 0 {
			t.Errorf("the scraper's token was reviewed again after 3,000 forged ones: they dropped its review from the cache")
		}
	})

	t.Run("a flood of forged tokens holds a bounded number of reviews, and the cached scraper is served", func(t *testing.T) {
		gate := make(chan struct{})
		rv.mu.Lock()
		rv.gate = gate
		rv.mu.Unlock()
		const flood = 40
		codes := make(chan int, flood)
		for i := range flood {
			go func() {
				code, _, _ := get(http.MethodGet, "/metrics", fmt.Sprintf("Bearer forged-%d", i))
				codes <- code
			}()
		}
		var busy int
		deadline := time.After(30 * time.Second)
		for busy < flood-8 {
			select {
			case code := <-codes:
				if code != http.StatusServiceUnavailable {
					t.Fatalf("a forged token answered %d while the reviews were full, want 503", code)
				}
				busy++
			case <-deadline:
				t.Fatalf("%d forged tokens answered 503 in 30 s, want %d", busy, flood-8)
			}
		}
		if body := expect(http.MethodGet, "/metrics", "Bearer "+prometheus, http.StatusOK); body != "the metrics" {
			t.Fatalf("served %q", body)
		}
		rv.mu.Lock()
		rv.gate = nil
		rv.mu.Unlock()
		close(gate)
		for range 8 {
			if code := <-codes; code != http.StatusUnauthorized {
				t.Errorf("a forged token reviewed answered %d, want 401", code)
			}
		}
		if m := rv.maxInFlight.Load(); m > 8 {
			t.Errorf("%d TokenReviews in flight at once, want at most 8", m)
		}
	})
}

// env is the package's one API server, with the metrics-reader
// ClusterRole bound to ServiceAccount monitoring/prometheus, and a token
// of it and of monitoring/stranger (no grant).
type env struct {
	cp                   *harness.ControlPlane
	kube                 kubernetes.Interface
	prometheus, stranger string
}

var (
	sharedOnce sync.Once
	shared     *env
	sharedErr  error
	sharedDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		_ = shared.cp.Stop()
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// setup starts the package's API server, once.
func setup(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func start() (e *env, err error) {
	if sharedDir, err = os.MkdirTemp("", "metricsauth"); err != nil {
		return nil, err
	}
	cp, err := harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), sharedDir)
	if err != nil {
		return nil, err
	}
	e = &env{cp: cp, kube: kubernetes.NewForConfigOrDie(cp.Config)}
	shared = e // stopped by TestMain whatever follows
	ctx := context.Background()
	if err := cp.CreateNamespace(ctx, "monitoring"); err != nil {
		return nil, err
	}
	if _, err := e.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "monitoring"}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for name, tok := range map[string]*string{"prometheus": &e.prometheus, "stranger": &e.stranger} {
		if _, err := e.kube.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		tr, err := e.kube.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		*tok = tr.Status.Token
	}
	return e, nil
}

// counted returns a config of e's API server whose reviews rv counts, and
// an HTTP client of it.
func (e *env) counted(t *testing.T) (*reviews, *rest.Config, *http.Client) {
	t.Helper()
	rv := &reviews{}
	cfg := rest.CopyConfig(e.cp.Config)
	cfg.Wrap(rv.wrap)
	httpClient, err := rest.HTTPClientFor(cfg)
	must(t, err)
	return rv, cfg, httpClient
}

// flood runs 8 clients, each calling send with its number and a count of
// its own until stop: a new request as soon as its last is answered.
func flood(ctx context.Context, send func(ctx context.Context, client, i int)) (stop func(), sent *atomic.Int64) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sent = new(atomic.Int64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				send(ctx, g, i)
				sent.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }, sent
}

// A caller who goes away while its token is reviewed is no error of the
// filter's: logging one per request would let anyone write as many lines
// as they open requests.
func TestCallersGoneLogNothing(t *testing.T) {
	e := setup(t)
	rv, cfg, httpClient := e.counted(t)
	f, err := metricsauth.New(cfg, httpClient, metricsauth.Options{})
	must(t, err)
	var logged atomic.Int64
	log := funcr.New(func(_, _ string) { logged.Add(1) }, funcr.Options{})
	h := f.Wrap(log, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	gate := make(chan struct{})
	rv.mu.Lock()
	rv.gate = gate
	rv.mu.Unlock()
	defer func() {
		rv.mu.Lock()
		rv.gate = nil
		rv.mu.Unlock()
		close(gate)
	}()
	for i := range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", fmt.Sprintf("Bearer gone-%d", i))
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, req) }()
		for deadline := time.Now().Add(10 * time.Second); rv.inFlight.Load() < int64(i+1); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("review %d never reached the API server", i)
			}
		}
		cancel()
		<-done
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("a caller gone: %d, want 503", w.Code)
		}
	}
	if n := logged.Load(); n != 0 {
		t.Errorf("%d lines logged for 5 callers who went away", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
