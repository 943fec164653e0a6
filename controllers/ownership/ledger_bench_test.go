package ownership

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkDecide decides make bench-scale's largest table from scratch:
// 5,000 ToolSets of 10 names each, spread over 100 namespaces, every name
// of 709 bytes (the bench's entries). "fits" has a budget every claim
// fits; "binds" the table's bytes cap, which denies about a tenth of the
// names, as the publisher decides on every offer while the cap binds;
// "-index" as the index decides then. Run with
// go test ./controllers/ownership -run '^$' -bench Decide -benchmem -count 6
func BenchmarkDecide(b *testing.B) {
	const toolSets, names, entryBytes = 5000, 10, 709
	now := time.Now()
	claims := make([]Claim, toolSets)
	prev := Ledger{}
	for i := range claims {
		ts := types.NamespacedName{Namespace: fmt.Sprintf("bench-%02d", i%100), Name: fmt.Sprintf("set-%04d", i)}
		cl := Claim{ToolSet: ts, Created: now.Add(time.Duration(i) * time.Millisecond), UID: types.UID(fmt.Sprintf("uid-%04d", i)),
			Names: make([]string, names), Bytes: make([]int64, names)}
		for j := range names {
			cl.Names[j] = fmt.Sprintf("set%04d_tool%02d", i, j)
			cl.Bytes[j] = entryBytes
			prev[cl.Names[j]] = Record{Owner: ts, UID: cl.UID, Since: now, Why: Claimed}
		}
		claims[i] = cl
	}
	for _, bc := range []struct {
		name     string
		maxBytes int64
	}{
		{"fits", 64 << 20},
		{"binds", toolSets * names * entryBytes * 9 / 10},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := Input{Claims: claims, Budget: Budget{MaxTableBytes: bc.maxBytes}, Now: now}
			b.ReportAllocs()
			for b.Loop() {
				d := Decide(prev, in)
				if len(d.Ledger) == 0 {
					b.Fatal("nothing owned")
				}
			}
		})
		// As the index decides: no verdicts, in what the last decision
		// worked in.
		b.Run(bc.name+"-index", func(b *testing.B) {
			in := Input{Claims: claims, Budget: Budget{MaxTableBytes: bc.maxBytes}, Now: now}
			prevOf := func(name string) (Record, bool) {
				rec, ok := prev[name]
				return rec, ok
			}
			var buf decideBuf
			b.ReportAllocs()
			for b.Loop() {
				d := decide(prevOf, in, &buf)
				if len(d.records) == 0 {
					b.Fatal("nothing owned")
				}
			}
		})
	}
}
