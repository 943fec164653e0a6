package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestLazyValuesWritesWhatZapWould writes the same lines through the
// manager's logger with and without lazyValues: they are the same, the
// values added with WithValues, names and the caller included.
func TestLazyValuesWritesWhatZapWould(t *testing.T) {
	write := func(l logr.Logger) {
		l = l.WithName("controller").WithValues("controller", "toolset", "ToolSet", types.NamespacedName{Namespace: "ns", Name: "a"})
		l = l.WithValues("reconcileID", "r-1").WithName("sub")
		l.Info("Updated status", "ready", "True")
		l.V(1).Info("Scraped pods", "selected", 1)
		l.Error(io.EOF, "Failed", "pod", "p-0")
		l.WithValues("late", 2).Info("after", "k", "v")
	}
	lines := func(lazy bool) []map[string]any {
		var buf bytes.Buffer
		l := zap.New(zap.WriteTo(&buf), zap.UseDevMode(false), zap.RawZapOpts(uberzap.AddCaller()))
		if lazy {
			l = lazyValues(l)
		}
		write(l)
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			delete(m, "ts")
			out = append(out, m)
		}
		return out
	}
	want, got := lines(false), lines(true)
	if len(want) != 3 {
		t.Fatalf("zap wrote %d lines, want 3 (the V(1) line is off): %v", len(want), want)
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		t.Fatalf("with lazyValues:\n%s\nwant, as zap writes them:\n%s", gj, wj)
	}
	if want[0]["reconcileID"] != "r-1" || want[0]["logger"] != "controller.sub" || !strings.HasPrefix(want[0]["caller"].(string), "manager/lazylog_test.go:") {
		t.Fatalf("the line lacks the values it was given: %v", want[0])
	}
}

// BenchmarkLazyValues gives a logger what controller-runtime adds for each
// reconcile and writes one line at V(1), off by default, as a steady
// reconcile does: zap's own logger (the baseline, in the same run) against
// lazyValues.
//
//	go test ./cmd/manager -run '^$' -bench BenchmarkLazyValues -benchmem -count 6
func BenchmarkLazyValues(b *testing.B) {
	for _, bc := range []struct {
		name string
		lazy bool
	}{{"zap", false}, {"lazy", true}} {
		b.Run(bc.name, func(b *testing.B) {
			l := zap.New(zap.WriteTo(io.Discard))
			if bc.lazy {
				l = lazyValues(l)
			}
			key := types.NamespacedName{Namespace: "bench-01", Name: "set-0042"}
			b.ReportAllocs()
			for b.Loop() {
				rl := l.WithValues("controller", "toolset", "controllerGroup", "toolplane.io", "controllerKind", "ToolSet",
					"ToolSet", key, "namespace", key.Namespace, "name", key.Name)
				rl = rl.WithValues("reconcileID", "6f1c2d7e-3b0a-4c5e-9a8f-1d2e3f4a5b6c")
				rl.V(1).Info("Scraped pods", "selected", 1, "scraped", 1, "failed", 0)
			}
		})
	}
}
