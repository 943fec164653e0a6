package metricsauth_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/toolplane/toolplane/internal/metricsauth"
)

// Attacks on the filter that worked, against a real API server: a hostile
// caller who reaches the metrics port denied service to a scraper whose
// answers were cached.
func TestRedTeam(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	// stranger is any workload's ServiceAccount: no grant on /metrics.
	prometheus, stranger := e.prometheus, e.stranger

	rv, cfg, httpClient := e.counted(t)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the metrics") })
	serveWith := func(h http.Handler) func(ctx context.Context, method, path, token string) int {
		return func(ctx context.Context, method, path, token string) int {
			req := httptest.NewRequestWithContext(ctx, method, path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code
		}
	}

	// The gateway wraps its whole mux (cmd/gateway secureMetrics), so any
	// path reached the filter. Every authenticated user is allowed get on
	// /apis/* (the bootstrap system:discovery role), so a caller with any
	// ServiceAccount token filled the one cache of decisions with allows
	// that last 5 minutes: at the 5 SubjectAccessReviews a second the
	// filter allows, 1,500 live ones, past its bound of 1,000, and a full
	// cache drops arbitrary entries, the scraper's among them (two runs
	// failed, after 1,750 and 2,250 questions). The filter now asks only of
	// the paths it serves (Options.Paths) and of GET and HEAD. The limit is
	// lifted here, as in TestFilter, so that what took the attacker minutes
	// takes the test seconds.
	t.Run("another user's questions of other paths and methods ask nothing, and leave the scraper's allow", func(t *testing.T) {
		unlimited := rest.CopyConfig(cfg)
		unlimited.QPS = -1
		kube := kubernetes.NewForConfigOrDie(unlimited)
		f := metricsauth.NewWithClients(kube.AuthenticationV1().TokenReviews(), kube.AuthenticationV1().TokenReviews(), kube.AuthorizationV1().SubjectAccessReviews(), metricsauth.Options{})
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics)
		serve := serveWith(f.Wrap(logr.Discard(), mux))
		if code := serve(ctx, http.MethodGet, "/metrics", prometheus); code != http.StatusOK {
			t.Fatalf("the scraper: %d", code)
		}
		before := rv.access.Load()
		for i := range 2000 {
			if code := serve(ctx, http.MethodGet, fmt.Sprintf("/apis/x%d", i), stranger); code != http.StatusNotFound {
				t.Fatalf("another user's GET /apis/x%d: %d, want 404", i, code)
			}
			if code := serve(ctx, fmt.Sprintf("GET%d", i), "/metrics", stranger); code != http.StatusMethodNotAllowed {
				t.Fatalf("another user's GET%d /metrics: %d, want 405", i, code)
			}
		}
		if code := serve(ctx, http.MethodGet, "/metrics", prometheus); code != http.StatusOK {
			t.Fatalf("the scraper after 4,000 of another user's questions: %d", code)
		}
		if n := rv.access.Load() - before; n != 0 {
			t.Fatalf("%d SubjectAccessReviews for 4,000 questions of paths and methods not served and the scraper's cached one, want 0", n)
		}
	})

	// Anyone who reaches the port, without any credential, kept the 8
	// review slots full: 8 clients, each sending its next forged token
	// when its last is answered (some 5 a second in all, the TokenReview
	// rate, each held in its slot while it waits its turn). A freed slot
	// was its client's again within a millisecond. A scraper's token
	// review is cached for TokenTTL only: when it expired the scraper
	// needed a slot, never got one, and was answered 503 for as long as
	// the flood lasted (not served for 15 s, 1 min 14 s into the flood).
	// A token accepted before is now reviewed in a lane of its own, with
	// its own slots and rate, and so is every SubjectAccessReview. The
	// cache times are short here, so that both expire in the flood.
	t.Run("a flood of forged tokens leaves a scraper served when its answers expire", func(t *testing.T) {
		const tokenTTL, allowTTL = 2 * time.Second, 3 * time.Second
		f, err := metricsauth.New(cfg, httpClient, metricsauth.Options{TokenTTL: tokenTTL, AllowTTL: allowTTL}) // the real limits
		must(t, err)
		serve := serveWith(f.Wrap(logr.Discard(), metrics))
		if code := serve(ctx, http.MethodGet, "/metrics", prometheus); code != http.StatusOK {
			t.Fatalf("the scraper before the flood: %d", code)
		}
		stop, sent := flood(ctx, func(ctx context.Context, g, i int) {
			serve(ctx, http.MethodGet, "/metrics", fmt.Sprintf("forged-%d-%d", g, i))
		})
		defer stop()
		start := time.Now()
		lastServed, denied, busy := start, 0, 0
		for time.Since(start) < 3*allowTTL {
			switch code := serve(ctx, http.MethodGet, "/metrics", prometheus); code {
			case http.StatusOK:
				lastServed = time.Now()
			default:
				denied++
				if d := time.Since(lastServed); d > time.Second {
					t.Fatalf("the scraper, served at the start, scraping every 100 ms: not served for %s (%d answers %d since), %s into a flood of %d forged tokens from a caller without credentials",
						d.Round(time.Second), denied, code, time.Since(start).Round(time.Second), sent.Load())
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The flood was real: its lane was full, and forged tokens were
		// answered 503 at once.
		for i := range 50 {
			if serve(ctx, http.MethodGet, "/metrics", fmt.Sprintf("forged-probe-%d", i)) == http.StatusServiceUnavailable {
				busy++
			}
		}
		if busy == 0 {
			t.Errorf("no forged token was answered 503 during the flood: the flood did not fill its lane, and proves nothing")
		}
	})
}
