package ownership

import (
	"strings"
	"testing"
	"time"
)

// TestBudgetTableCeiling checks that a JSON ceiling that is not the flag's
// is named as TableCeiling says, by Apply and by Fits alike, and never by
// its value, which moves with the tables tried; and that without one the
// flag and its value are named.
func TestBudgetTableCeiling(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	es := append(entries("bloat", "big", t0, 10, 100), entries("small", "a", t0.Add(time.Hour), 5, 10)...)
	for _, tt := range []struct {
		b         Budget
		want, not string
	}{
		{Budget{MaxTableBytes: 800}, "would pass 800 bytes (--max-table-bytes); ", "segments"},
		{Budget{MaxTableBytes: 800, TableCeiling: "what its index's 63 segments of JSON hold"}, "would pass what its index's 63 segments of JSON hold; ", "800"},
	} {
		d := tt.b.Apply(es)
		if len(d) == 0 {
			t.Fatalf("%+v denied nothing", tt.b)
		}
		for name, dn := range d {
			if dn.Policy != OverBudget || !strings.Contains(dn.Reason, tt.want) || strings.Contains(dn.Reason, tt.not) {
				t.Fatalf("%+v: %s: %+v, want OverBudget naming %q, not %q", tt.b, name, dn, tt.want, tt.not)
			}
		}
		var tot Totals
		for _, e := range es[:8] {
			tot.Add(e)
		}
		dn, ok := tt.b.Fits(tot, es[8])
		if ok || !strings.Contains(dn.Reason, tt.want) || strings.Contains(dn.Reason, tt.not) {
			t.Fatalf("%+v: Fits = %+v, %v; want a denial naming %q, not %q", tt.b, dn, ok, tt.want, tt.not)
		}
	}
}
