package controllers

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// ledgerWorld is a cluster of ToolSets as the property test below drives
// it: what each claims now, by which object.
type ledgerWorld struct {
	created map[types.NamespacedName]time.Time
	uid     map[types.NamespacedName]types.UID
	tools   map[types.NamespacedName][]spec.TableTool
	denied  map[types.NamespacedName]map[string]ownership.Denial
	// ratio caches compressionRatio of each ToolSet's tools.
	ratio map[types.NamespacedName]float64
}

// input is what ownership.Decide weighs of the world, under p's rule and
// budget, the tools weighed as p weighs them.
func (w *ledgerWorld) input(p *TablePublisher, now time.Time) ownership.Input {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := ownership.Input{Rule: p.index.Rule(), Budget: p.budget(), Hold: p.holds(), Now: now}
	for _, ts := range slices.SortedFunc(maps.Keys(w.tools), compareNamespacedName) {
		tools := w.tools[ts]
		cl := ownership.Claim{ToolSet: ts, Created: w.created[ts], UID: w.uid[ts], Denied: w.denied[ts]}
		sizes := entrySizes(tools)
		ratio, ok := w.ratio[ts]
		if !ok && p.encodedCeiling > 0 {
			ratio = compressionRatio(tools)
			w.ratio[ts] = ratio
		}
		for i, t := range tools {
			cl.Names = append(cl.Names, t.Name)
			cl.Bytes = append(cl.Bytes, int64(sizes[i]))
			if p.encodedCeiling > 0 {
				cl.Encoded = append(cl.Encoded, max(int64(float64(sizes[i])*ratio), 1))
			}
		}
		in.Claims = append(in.Claims, cl)
	}
	return in
}

// TestPublisherAgreesWithDecide drives a publisher through random offers,
// re-creations, withdrawals, policy changes and compressed ceilings, under
// random budgets, and checks after every step that what it keeps
// incrementally (the ledger, every verdict, the table it would write, the
// counts its budget looks at) is what ownership.Decide makes from scratch
// of the ledger before the step and every claim after it. 20 seeds keep
// it to seconds under -race; 400 passed when it was written.
func TestPublisherAgreesWithDecide(t *testing.T) {
	const seeds, steps = 20, 60
	names := []string{"a", "b", "c", "d", "e", "f", "pay_x"}
	budgets := []ownership.Budget{
		{},
		{MaxToolsPerNamespace: 2},
		{MaxTableBytes: 900},
		{MaxToolsPerNamespace: 3, MaxTableBytes: 1400},
	}
	policySets := [][]ownership.Policy{
		nil,
		{{Name: "pay", Names: []string{"pay_*"}, Namespaces: []string{"ns-2"}}},
		{{Name: "locked", Names: []string{"c"}}},
	}
	// The seeds run at once, each with a publisher of its own: after a
	// decision over every claim an offer waits for the batch (decideGap),
	// so a seed spends most of its time asleep, and 20 in a row took over
	// a minute under -race.
	errs := make([]error, seeds)
	var wg sync.WaitGroup
	for seed := range uint64(seeds) {
		wg.Go(func() { errs[seed] = agreesWithDecide(seed, steps, names, budgets, policySets) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// agreesWithDecide is one seed of TestPublisherAgreesWithDecide: it
// returns the first step at which the publisher and ownership.Decide
// disagree.
func agreesWithDecide(seed uint64, steps int, names []string, budgets []ownership.Budget, policySets [][]ownership.Policy) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	budget := budgets[int(seed)%len(budgets)]
	p := loadedPublisher(&TablePublisher{Budget: budget})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	var keys []types.NamespacedName
	for i := range 6 {
		keys = append(keys, types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("ts-%d", i)})
	}
	w := &ledgerWorld{created: map[types.NamespacedName]time.Time{}, uid: map[types.NamespacedName]types.UID{},
		tools: map[types.NamespacedName][]spec.TableTool{}, denied: map[types.NamespacedName]map[string]ownership.Denial{},
		ratio: map[types.NamespacedName]float64{}}
	serial := 0
	newObject := func(ts types.NamespacedName) {
		serial++
		// Creation times in whole seconds, as the API server's: ties.
		w.created[ts] = now.Add(-time.Duration(rng.IntN(4)) * time.Second).Truncate(time.Second)
		w.uid[ts] = types.UID(fmt.Sprintf("uid-%d", serial))
	}
	for _, ts := range keys {
		newObject(ts)
	}
	var ledger ownership.Ledger
	for step := range steps {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		now = now.Add(time.Second)
		ts := keys[rng.IntN(len(keys))]
		var got map[string]ownership.Verdict
		op := rng.IntN(10)
		switch {
		case op < 6 || op == 6:
			if op == 6 {
				// Deleted and created again, with no withdraw between:
				// the publisher withdraws the old object first, a
				// decision of its own.
				if _, ok := w.tools[ts]; ok {
					delete(w.tools, ts)
					delete(w.denied, ts)
					delete(w.ratio, ts)
					ledger = ownership.Decide(ledger, w.input(p, now)).Ledger
				}
				newObject(ts)
			}
			var tools []spec.TableTool
			denied := map[string]ownership.Denial{}
			for _, name := range names {
				if rng.IntN(2) == 0 {
					continue
				}
				e := entry(ts, name, name)
				e.Description = strings.Repeat("x", rng.IntN(300))
				e.ToolSetUID = string(w.uid[ts])
				tools = append(tools, e)
				if rng.IntN(8) == 0 {
					denied[name] = ownership.Denial{Policy: ownership.OverBudget, Reason: "per ToolSet"}
				}
			}
			if len(denied) == 0 {
				denied = nil
			}
			var err error
			got, err = p.Offer(ctx, Offer{ToolSet: ts, Created: metav1.NewTime(w.created[ts]), UID: w.uid[ts], Tools: tools, Denied: denied})
			if err != nil {
				return fmt.Errorf("%s: offer: %w", where, err)
			}
			delete(w.ratio, ts)
			if len(tools) == 0 {
				delete(w.tools, ts)
				delete(w.denied, ts)
			} else {
				w.tools[ts], w.denied[ts] = tools, denied
			}
		case op == 7:
			if err := p.Withdraw(ctx, ts); err != nil {
				return fmt.Errorf("%s: withdraw: %w", where, err)
			}
			delete(w.tools, ts)
			delete(w.denied, ts)
		case op == 8:
			if err := p.SetPolicies(ctx, policySets[rng.IntN(len(policySets))]); err != nil {
				return fmt.Errorf("%s: policies: %w", where, err)
			}
		default:
			// A table that did not fit its ConfigMaps, or one that did.
			if rng.IntN(2) == 0 {
				p.mu.Lock()
				p.encodedCeiling = int64(200 + rng.IntN(1500))
				p.rebudgetLocked()
				p.mu.Unlock()
			} else {
				// A table written: the ceiling goes if it did not bind.
				p.relax()
			}
		}

		d := ownership.Decide(ledger, w.input(p, now))
		ledger = d.Ledger
		if got != nil && !reflect.DeepEqual(got, nonNil(d.Verdicts[ts])) {
			return fmt.Errorf("%s: the offer's verdicts\n%v\nwant\n%v", where, got, d.Verdicts[ts])
		}
		p.mu.Lock()
		if !reflect.DeepEqual(p.ledger, ledger) {
			p.mu.Unlock()
			return fmt.Errorf("%s: the publisher's ledger\n%v\nwant\n%v", where, p.ledger, ledger)
		}
		for _, k := range keys {
			if v := p.verdicts(k); !reflect.DeepEqual(v, nonNil(d.Verdicts[k])) {
				p.mu.Unlock()
				return fmt.Errorf("%s: the verdicts of %s\n%v\nwant\n%v", where, k, v, d.Verdicts[k])
			}
		}
		var bytes int64
		ns := map[string]int{}
		for _, e := range d.Publish {
			bytes += e.Bytes
			ns[e.ToolSet.Namespace]++
		}
		if owned, nsOwned := p.index.OwnedBytes(); owned != bytes || !maps.Equal(nsOwned, ns) {
			p.mu.Unlock()
			return fmt.Errorf("%s: the budget's counts %d %v, want %d %v", where, owned, nsOwned, bytes, ns)
		}
		p.mu.Unlock()
		table, _ := p.table()
		var published []ownership.Entry
		for _, tt := range table.Tools {
			published = append(published, ownership.Entry{Name: tt.Name, ToolSet: types.NamespacedName{Namespace: tt.ToolSet.Namespace, Name: tt.ToolSet.Name}})
		}
		var want []ownership.Entry
		for _, e := range d.Publish {
			want = append(want, ownership.Entry{Name: e.Name, ToolSet: e.ToolSet})
		}
		if !slices.Equal(published, want) {
			return fmt.Errorf("%s: the table\n%v\nwant\n%v", where, published, want)
		}
	}
	return nil
}

func nonNil(v map[string]ownership.Verdict) map[string]ownership.Verdict {
	if v == nil {
		return map[string]ownership.Verdict{}
	}
	return v
}
