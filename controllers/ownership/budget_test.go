package ownership

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func entries(ns, name string, created time.Time, n int, bytes int64) []Entry {
	var out []Entry
	for i := range n {
		out = append(out, Entry{Name: fmt.Sprintf("%s_%s_%03d", ns, name, i), ToolSet: types.NamespacedName{Namespace: ns, Name: name}, Created: created, Bytes: bytes})
	}
	return out
}

func deniedNames(d map[string]Denial) []string {
	return slices.Sorted(maps.Keys(d))
}

func TestBudgetApply(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("no budget denies nothing", func(t *testing.T) {
		if d := (Budget{}).Apply(entries("a", "x", t0, 100, 1000)); len(d) != 0 {
			t.Fatalf("denied %v", deniedNames(d))
		}
	})
	t.Run("a namespace past its tools keeps its earliest ToolSet's", func(t *testing.T) {
		es := append(entries("crm", "late", t0.Add(time.Hour), 3, 1), entries("crm", "early", t0, 3, 1)...)
		es = append(es, entries("other", "x", t0.Add(2*time.Hour), 3, 1)...)
		d := Budget{MaxToolsPerNamespace: 4}.Apply(es)
		want := []string{"crm_late_001", "crm_late_002"}
		if got := deniedNames(d); !slices.Equal(got, want) {
			t.Fatalf("denied %v, want %v", got, want)
		}
		if d["crm_late_001"].Policy != OverBudget {
			t.Fatalf("denial %+v does not name OverBudget", d["crm_late_001"])
		}
	})
	t.Run("past the table bytes, the namespace that weighs most pays", func(t *testing.T) {
		es := append(entries("bloat", "big", t0, 10, 100), entries("small", "a", t0.Add(time.Hour), 5, 10)...)
		es = append(es, entries("mid", "b", t0.Add(time.Hour), 5, 20)...)
		// 1000 + 50 + 100 = 1150; at most 800.
		d := Budget{MaxTableBytes: 800}.Apply(es)
		for name := range d {
			if name[:5] != "bloat" {
				t.Fatalf("denied %s of a namespace that does not bloat the table", name)
			}
		}
		// 1150 - 800 = 350: four tools of 100 bytes.
		want := []string{"bloat_big_006", "bloat_big_007", "bloat_big_008", "bloat_big_009"}
		if got := deniedNames(d); !slices.Equal(got, want) {
			t.Fatalf("denied %v, want %v", got, want)
		}
	})
	t.Run("a table of exactly its bytes keeps every tool, and one byte less denies", func(t *testing.T) {
		es := append(entries("bloat", "big", t0, 10, 100), entries("small", "a", t0.Add(time.Hour), 5, 10)...)
		if d := (Budget{MaxTableBytes: 1050}).Apply(es); len(d) != 0 {
			t.Fatalf("denied %v", deniedNames(d))
		}
		if got, want := deniedNames(Budget{MaxTableBytes: 1049}.Apply(es)), []string{"bloat_big_009"}; !slices.Equal(got, want) {
			t.Fatalf("denied %v, want %v", got, want)
		}
	})
	t.Run("whatever the order of the entries, and within the bytes", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			var es []Entry
			for ns := range 1 + r.IntN(5) {
				for ts := range 1 + r.IntN(3) {
					es = append(es, entries(fmt.Sprintf("ns%d", ns), fmt.Sprintf("ts%d", ts), t0.Add(time.Duration(r.IntN(3))*time.Minute), r.IntN(20), int64(1+r.IntN(500)))...)
				}
			}
			// No cap per namespace (0) now and then.
			b := Budget{MaxToolsPerNamespace: r.IntN(31), MaxTableBytes: int64(r.IntN(20000))}
			d := b.Apply(es)
			shuffled := slices.Clone(es)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if d2 := b.Apply(shuffled); !maps.Equal(d, d2) {
				t.Fatalf("the outcome depends on the order: %v vs %v", deniedNames(d), deniedNames(d2))
			}
			var kept int64
			perNS := map[string]int{}
			for _, e := range es {
				if _, ok := d[e.Name]; !ok {
					kept += e.Bytes
					perNS[e.ToolSet.Namespace]++
				}
			}
			if kept > b.MaxTableBytes && b.MaxTableBytes > 0 {
				t.Fatalf("kept %d bytes, more than %d", kept, b.MaxTableBytes)
			}
			for ns, n := range perNS {
				if b.MaxToolsPerNamespace > 0 && n > b.MaxToolsPerNamespace {
					t.Fatalf("namespace %s kept %d tools, more than %d", ns, n, b.MaxToolsPerNamespace)
				}
			}
		}
	})
}

func TestBudgetApplyEncoded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	weigh := func(es []Entry, encoded int64) []Entry {
		for i := range es {
			es[i].Encoded = encoded
		}
		return es
	}
	// The large namespace in JSON compresses well; the small one does not:
	// the one that weighs most compressed pays.
	es := append(weigh(entries("verbose", "a", t0, 10, 1000), 50), weigh(entries("noise", "b", t0.Add(time.Hour), 10, 300), 300)...)
	// 500 + 3000 compressed; at most 2000.
	d := Budget{MaxTableBytes: 1 << 20, MaxEncodedBytes: 2000, EncodedCeiling: "the test's parts"}.Apply(es)
	want := []string{"noise_b_005", "noise_b_006", "noise_b_007", "noise_b_008", "noise_b_009"}
	if got := deniedNames(d); !slices.Equal(got, want) {
		t.Fatalf("denied %v, want %v", got, want)
	}
	if r := d["noise_b_009"].Reason; d["noise_b_009"].Policy != OverBudget || !strings.Contains(r, "the test's parts") || !strings.Contains(r, "noise") {
		t.Fatalf("denial %+v names neither OverBudget, the ceiling nor the namespace", d["noise_b_009"])
	}
	// The JSON ceiling first, then the compressed one over what is left.
	d = Budget{MaxTableBytes: 10_000, MaxEncodedBytes: 2000}.Apply(es)
	// 13,000 of JSON: verbose pays 3 tools (3,000); then 350 + 3000 compressed: noise pays 5.
	want = []string{"noise_b_005", "noise_b_006", "noise_b_007", "noise_b_008", "noise_b_009", "verbose_a_007", "verbose_a_008", "verbose_a_009"}
	if got := deniedNames(d); !slices.Equal(got, want) {
		t.Fatalf("denied %v, want %v", got, want)
	}
}

// TestTightenRelax checks the compressed ceiling's steps: the first table
// that does not fit tries the capacity, every later one a sixth less than
// the lower of the ceiling and what the last table kept, never below 1;
// a written table the ceiling did not bind drops it.
func TestTightenRelax(t *testing.T) {
	for _, c := range []struct{ ceiling, capacity, kept, want int64 }{
		{0, 6000, 9000, 6000},
		{0, 6000, 0, 6000},
		{6000, 6000, 9000, 5000},
		{6000, 6000, 3000, 2500},
		{5, 6000, 5, 4},
		{1, 6000, 1, 1},
		{2, 6000, 0, 1},
	} {
		if got := Tighten(c.ceiling, c.capacity, c.kept); got != c.want {
			t.Errorf("Tighten(%d, %d, %d) = %d, want %d", c.ceiling, c.capacity, c.kept, got, c.want)
		}
	}
	// Tightening from any ceiling, whatever was kept, reaches 1 in a
	// bounded number of steps, each lower than the last.
	for _, kept := range []int64{1 << 40, 1 << 20, 7} {
		ceiling, steps := Tighten(0, 1<<30, kept), 0
		for ceiling > 1 {
			next := Tighten(ceiling, 1<<30, kept)
			if next >= ceiling {
				t.Fatalf("Tighten(%d, _, %d) = %d: not lower", ceiling, kept, next)
			}
			ceiling, steps = next, steps+1
		}
		if steps > 120 {
			t.Fatalf("kept %d: %d steps to 1", kept, steps)
		}
	}
	for _, c := range []struct {
		ceiling int64
		bound   bool
		want    int64
	}{{0, false, 0}, {0, true, 0}, {500, false, 0}, {500, true, 500}} {
		if got := Relax(c.ceiling, c.bound); got != c.want {
			t.Errorf("Relax(%d, %v) = %d, want %d", c.ceiling, c.bound, got, c.want)
		}
	}
}
