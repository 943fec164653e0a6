package ownership

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane/test/harness"
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

// BenchmarkRebudget measures the index's decision after one ToolSet's
// changed offer (one entry resized, and back) in make bench-scale's largest
// table, 5,000 ToolSets of 10 names in 100 namespaces, while the table's
// bytes cap binds (nine tenths of what the names weigh). "past-cap" adds a
// namespace of 20,000 small names, 19,500 of them past a
// MaxToolsPerNamespace of 500 (what every other namespace holds): a
// tenant that publishes past its cap, whose denied names fit any room
// left. Run with
// go test ./controllers/ownership -run '^$' -bench Rebudget -benchmem -benchtime 100x -count 6
func BenchmarkRebudget(b *testing.B) {
	const toolSets, names, entryBytes = 5000, 10, 709
	for _, bc := range []struct {
		name    string
		pastCap int
	}{
		{"bytes", 0},
		{"past-cap", 20000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			now := time.Now()
			x := NewIndex()
			var budget Budget
			x.Budget = func() Budget { return budget }
			x.Now = func() time.Time { return now }
			claims := make([]*Indexed, toolSets)
			keys := make([]types.NamespacedName, toolSets)
			for i := range claims {
				keys[i] = types.NamespacedName{Namespace: fmt.Sprintf("bench-%02d", i%100), Name: fmt.Sprintf("set-%04d", i)}
				c := &Indexed{Created: now.Add(time.Duration(i) * time.Millisecond), UID: types.UID(fmt.Sprintf("uid-%04d", i))}
				for j := range names {
					c.Names = append(c.Names, fmt.Sprintf("set%04d_tool%02d", i, j))
					c.Sizes = append(c.Sizes, entryBytes)
				}
				claims[i] = c
				x.Offer(keys[i], c, nil)
			}
			if bc.pastCap > 0 {
				budget.MaxToolsPerNamespace = toolSets * names / 100
				c := &Indexed{Created: now.Add(-time.Hour), UID: "uid-past-cap"}
				for j := range bc.pastCap {
					c.Names = append(c.Names, fmt.Sprintf("past%05d", j))
					c.Sizes = append(c.Sizes, 50)
				}
				x.Offer(types.NamespacedName{Namespace: "past-cap", Name: "set"}, c, nil)
			}
			budget.MaxTableBytes = toolSets * names * entryBytes * 9 / 10
			x.Rebudget()
			// Two versions of each claim, alternated: every offer changes.
			alt := make([]*Indexed, toolSets)
			for i, c := range claims {
				a := &Indexed{Created: c.Created, UID: c.UID, Names: c.Names, Sizes: append([]int32(nil), c.Sizes...)}
				a.Sizes[0] += 24
				alt[i] = a
			}
			offer := func(i int) {
				k := (i * 7919) % toolSets
				c := claims[k]
				if (i/toolSets)%2 == 0 {
					c = alt[k]
				}
				x.Offer(keys[k], c, nil)
				x.Rebudget()
				x.Drain(func(types.NamespacedName) {})
			}
			// Untimed: the first decisions under the cap weigh every name.
			offer(0)
			offer(toolSets)
			b.ReportAllocs()
			defer harness.CPUPerOp(b)()
			i := 1
			for b.Loop() {
				offer(i)
				i++
			}
			if owned, _ := x.OwnedBytes(); owned > budget.MaxTableBytes {
				b.Fatalf("owned %d bytes, over the cap %d", owned, budget.MaxTableBytes)
			}
		})
	}
}
