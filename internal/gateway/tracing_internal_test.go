package gateway

import (
	"net/http"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/propagation"
)

// headerCarrier reads and writes a header as propagation.HeaderCarrier
// does, and finds the W3C keys the propagators ask for without a copy.
func TestHeaderCarrierIsHeaderCarrierWithoutCopies(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.Add("Baggage", "a=1")
	h.Add("baggage", "b=2")
	h.Set("X-Other", "x")
	mine, theirs := headerCarrier(h), propagation.HeaderCarrier(h)
	for _, k := range []string{"traceparent", "tracestate", "baggage", "Traceparent", "x-other", "X-Other", "missing"} {
		if mine.Get(k) != theirs.Get(k) || !slices.Equal(mine.Values(k), theirs.Values(k)) {
			t.Errorf("%s: %q %q, HeaderCarrier has %q %q", k, mine.Get(k), mine.Values(k), theirs.Get(k), theirs.Values(k))
		}
	}
	mk, tk := mine.Keys(), theirs.Keys()
	slices.Sort(mk)
	slices.Sort(tk)
	if !slices.Equal(mk, tk) {
		t.Errorf("keys %q, HeaderCarrier has %q", mk, tk)
	}
	out := http.Header{}
	headerCarrier(out).Set("tracestate", "k=v")
	headerCarrier(out).Set("x-custom", "c")
	if out.Get("Tracestate") != "k=v" || out.Get("X-Custom") != "c" || len(out) != 2 {
		t.Errorf("set: %v", out)
	}
	if n := testing.AllocsPerRun(100, func() {
		_ = mine.Get("traceparent")
		_ = mine.Get("tracestate")
		_ = mine.Values("baggage")
	}); n != 0 {
		t.Errorf("looking up the W3C keys: %.0f allocations, want none", n)
	}
}
