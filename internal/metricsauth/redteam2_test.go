package metricsauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/toolplane/toolplane/internal/metricsauth"
)

// Attacks on the fix of 7d8e034 that worked, against a real API server:
// a caller with a ServiceAccount token of its own (any workload's, no
// grant on /metrics) spells it many ways, each a token the API server
// accepts, each a token of its own to the filter.
func TestRedTeam2(t *testing.T) {
	e := setup(t)
	cp, kube, ctx := e.cp, e.kube, t.Context()
	prometheus, stranger := e.prometheus, e.stranger
	// variant is the stranger's one token, spelled its i-th way (i below
	// 4,096): each of its three base64url segments is 4 bits short of a
	// whole character, and the API server ignores those 4 bits, so the
	// last character of each can be any of 16 and the token is still one
	// it accepts, and a token of its own to the filter.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	variant := func(i int) string {
		parts := strings.Split(stranger, ".")
		for seg := range parts {
			p := parts[seg]
			if len(p)%4 != 2 {
				t.Fatalf("segment %d of %d characters", seg, len(p))
			}
			c := strings.IndexByte(alphabet, p[len(p)-1])
			parts[seg] = p[:len(p)-1] + string(alphabet[c&^15|(i>>(4*seg))&15])
		}
		return strings.Join(parts, ".")
	}

	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the metrics") })
	serveWith := func(h http.Handler) func(ctx context.Context, token string) int {
		return func(ctx context.Context, token string) int {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code
		}
	}

	// The premise of both attacks, and what the filter does of it: the API
	// server accepts the stranger's token in other spellings, and the
	// filter reviews them as the one token they are.
	t.Run("spellings of one token share one review", func(t *testing.T) {
		for _, v := range []string{variant(1), variant(4095)} {
			tr, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: v}}, metav1.CreateOptions{})
			must(t, err)
			if !tr.Status.Authenticated {
				t.Fatalf("the API server refuses a spelling of the stranger's token: the attacks below prove nothing")
			}
		}
		var reviews atomic.Int64
		c := rest.CopyConfig(cp.Config)
		c.QPS = -1
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(r *http.Request) (*http.Response, error) {
				if strings.HasSuffix(r.URL.Path, "/tokenreviews") {
					reviews.Add(1)
				}
				return rt.RoundTrip(r)
			})
		})
		kube := kubernetes.NewForConfigOrDie(c)
		f := metricsauth.NewWithClients(kube.AuthenticationV1().TokenReviews(), kube.AuthenticationV1().TokenReviews(), kube.AuthorizationV1().SubjectAccessReviews(), metricsauth.Options{})
		serve := serveWith(f.Wrap(logr.Discard(), metrics))
		for i := range 100 {
			if code := serve(ctx, variant(i*41)); code != http.StatusForbidden {
				t.Fatalf("spelling %d: %d, want 403", i*41, code)
			}
		}
		if n := reviews.Load(); n != 1 {
			t.Errorf("%d TokenReviews for 100 spellings of one token, want 1", n)
		}
	})

	// The lane of known tokens is the lane of any token accepted before:
	// the stranger's, spelled a new way each time, goes into it once
	// accepted in the lane of tokens never accepted (5 a second, 300 a
	// minute, 18,000 an hour, each known for KnownTTL). Once a spelling's
	// review expires (TokenTTL), asking with it again takes a slot of the
	// known lane and waits there for its rate limit: 8 clients cycling
	// through a few dozen spellings keep the 8 slots full, exactly as the
	// forged tokens kept the one lane full before 7d8e034, and the
	// scraper's expired review, in that lane, is answered 503.
	t.Run("the stranger's own token, spelled many ways, fills the lane of known tokens", func(t *testing.T) {
		const tokenTTL, allowTTL = 2 * time.Second, 3 * time.Second
		const spellings = 60
		httpClient, err := rest.HTTPClientFor(cp.Config)
		must(t, err)
		f, err := metricsauth.New(cp.Config, httpClient, metricsauth.Options{TokenTTL: tokenTTL, AllowTTL: allowTTL}) // the real limits
		must(t, err)
		serve := serveWith(f.Wrap(logr.Discard(), metrics))
		if code := serve(ctx, prometheus); code != http.StatusOK {
			t.Fatalf("the scraper before the flood: %d", code)
		}
		// Each spelling once, in the lane of tokens never accepted, at
		// its rate: 12 s.
		for i := 0; i < spellings; {
			switch code := serve(ctx, variant(i)); code {
			case http.StatusForbidden:
				i++
			case http.StatusServiceUnavailable:
				time.Sleep(50 * time.Millisecond)
			default:
				t.Fatalf("spelling %d: %d, want 403 (accepted, not allowed)", i, code)
			}
		}
		if code := serve(ctx, prometheus); code != http.StatusOK {
			t.Fatalf("the scraper before the flood: %d", code)
		}
		stop, sent := flood(ctx, func(ctx context.Context, g, i int) {
			serve(ctx, variant((g+8*i)%spellings))
		})
		defer stop()
		start := time.Now()
		lastServed, longest, denied, served := start, time.Duration(0), 0, 0
		for time.Since(start) < 3*allowTTL {
			if code := serve(ctx, prometheus); code == http.StatusOK {
				served++
				lastServed = time.Now()
			} else {
				denied++
			}
			longest = max(longest, time.Since(lastServed))
			time.Sleep(100 * time.Millisecond)
		}
		if longest > time.Second {
			t.Fatalf("the scraper, served at the start, scraping every 100 ms for %s: served %d times, refused %d; not served for %s on end, in a flood of %d requests with %d spellings of one token of a ServiceAccount without a grant",
				3*allowTTL, served, denied, longest.Round(100*time.Millisecond), sent.Load(), spellings)
		}
	})

	// seen, the tokens accepted within KnownTTL, holds 1,000: the
	// stranger's spellings, 5 a second through the lane of tokens never
	// accepted, each known for an hour, are 1,000 live entries after 200
	// s, 18,000 an hour; a full cache drops a quarter of its live entries,
	// the scraper's among them, and the scraper's next review is in the
	// lane of tokens never accepted, which a flood of forged tokens
	// fills. The limit is lifted here, so that what takes the attacker
	// minutes takes the test seconds.
	t.Run("the stranger's spellings evict the scraper from the tokens known", func(t *testing.T) {
		var unknownReviews, knownReviews atomic.Int64
		counting := func(n *atomic.Int64) *rest.Config {
			c := rest.CopyConfig(cp.Config)
			c.QPS = -1
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripper(func(r *http.Request) (*http.Response, error) {
					n.Add(1)
					return rt.RoundTrip(r)
				})
			})
			return c
		}
		unknown := kubernetes.NewForConfigOrDie(counting(&unknownReviews))
		known := kubernetes.NewForConfigOrDie(counting(&knownReviews))
		const tokenTTL = 2 * time.Second
		f := metricsauth.NewWithClients(unknown.AuthenticationV1().TokenReviews(), known.AuthenticationV1().TokenReviews(), known.AuthorizationV1().SubjectAccessReviews(), metricsauth.Options{TokenTTL: tokenTTL})
		serve := serveWith(f.Wrap(logr.Discard(), metrics))
		if code := serve(ctx, prometheus); code != http.StatusOK {
			t.Fatalf("the scraper: %d", code)
		}
		for i := range 3000 {
			if code := serve(ctx, variant(i)); code != http.StatusForbidden {
				t.Fatalf("spelling %d: %d, want 403", i, code)
			}
		}
		time.Sleep(tokenTTL + 100*time.Millisecond)
		before := unknownReviews.Load()
		if code := serve(ctx, prometheus); code != http.StatusOK {
			t.Fatalf("the scraper: %d", code)
		}
		if n := unknownReviews.Load() - before; n != 0 {
			t.Fatalf("the scraper's token, accepted %s before, reviewed again in the lane of tokens never accepted (%d reviews there), after 3,000 spellings of a stranger's one token (10 minutes at the real rate): dropped from the tokens known, the scraper shares its lane with forged tokens again", tokenTTL, n)
		}
	})
}
