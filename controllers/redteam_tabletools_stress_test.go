package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

// TestRedteamTableToolsStress is a red-team test of b2917a9 (tableTools
// sorts the owned entries after releasing p.mu). It runs a real publisher
// (Start: restore from a stored table, the flush loop, the ConfigMap store
// and its encoders, the stored callback) on a fake API server, while one
// goroutine per ToolSet does what the reconciler does with the slices it
// offers and gets back (assemble and its memory, the outage hold,
// Published as held tools and as contract baseline, withoutEndpoints,
// overToolSetBudget, restatus re-offers, Retain, Withdraw), and others set
// policies, tighten and relax the ceilings and read tableTools and table.
// Under -race, any write into an entry a table read still holds fails it;
// every read must be sorted, each name once, a record for each entry.
func TestRedteamTableToolsStress(t *testing.T) {
	ctx, cancel := context.WithCancel(quiet())
	defer cancel()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const nsCount, perNS, names = 3, 4, 12
	var objs []client.Object
	var keys []types.NamespacedName
	toolSets := map[types.NamespacedName]*v1alpha1.ToolSet{}
	for n := range nsCount {
		for i := range perNS {
			ts := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{
				Namespace: fmt.Sprintf("tenant-%d", n), Name: fmt.Sprintf("ts-%d", i),
				UID:               types.UID(fmt.Sprintf("uid-%d-%d", n, i)),
				CreationTimestamp: metav1.Unix(int64(100+n*perNS+i), 0),
				Generation:        1,
			}}
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "svc", Port: 8080}
			if i%2 == 1 {
				ts.Spec.Protocol = v1alpha1.ProtocolMCP
			}
			if i == 3 {
				ts.Spec.Prefix = "p_"
			}
			objs = append(objs, ts)
			key := types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
			keys = append(keys, key)
			toolSets[key] = ts
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()

	// The stored table: entries of every ToolSet (a name several of them
	// claim is stored under the first), one of a ToolSet that is gone, and
	// entries under a UID of another object.
	var stored []spec.TableTool
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for k, key := range keys {
		for j := range 5 {
			e := entry(key, fmt.Sprintf("tool_%02d", (k+j)%names), fmt.Sprintf("tool_%02d", (k+j)%names))
			e.ToolSetUID = string(toolSets[key].UID)
			if k == 5 {
				e.ToolSetUID = "someone-else"
			}
			stored = append(stored, e)
		}
	}
	gone := types.NamespacedName{Namespace: "tenant-0", Name: "gone"}
	stored = append(stored, entry(gone, "gone_tool", "gone_tool"))
	// Names twice: keep the first of each.
	seen := map[string]bool{}
	var tbl spec.Table
	for _, e := range stored {
		if seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		tbl.Tools = append(tbl.Tools, e)
	}
	spec.SortTableTools(tbl.Tools)
	recs := make([]spec.TableRecord, len(tbl.Tools))
	for i := range recs {
		recs[i] = spec.TableRecord{Since: at, Why: "Claimed"}
	}
	tbl.Records = recs
	seed := &configMapTable{client: c, reader: c, namespace: "toolplane-system", name: "tools", grace: time.Millisecond, gauges: newTableGauges()}
	if _, err := seed.write(ctx, &tbl); err != nil {
		t.Fatal(err)
	}

	p := &TablePublisher{Client: c, APIReader: c, Namespace: "toolplane-system", Name: "tools",
		Debounce: time.Millisecond, MaxDelay: 3 * time.Millisecond, RestoreTimeout: 20 * time.Millisecond,
		PartGracePeriod: time.Millisecond, Budget: ownership.Budget{MaxToolsPerNamespace: 20},
		gauges: newTableGauges()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Start(ctx)
	}()
	if err := p.waitLoaded(ctx); err != nil {
		t.Fatal(err)
	}

	var wg, rwg sync.WaitGroup
	// The reconciler: one goroutine per ToolSet, as its reconciles never
	// overlap.
	for k, key := range keys {
		rwg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(k), 7))
			ts := toolSets[key]
			mem := &toolSetMemory{uid: ts.UID}
			var last Offer
			for round := range 60 {
				var offered []spec.TableTool
				switch a := rng.IntN(10); {
				case a < 4: // a scrape
					doc := &spec.Document{SchemaVersion: spec.SchemaVersion, Revision: fmt.Sprintf("r%d", rng.IntN(3))}
					for j := range names {
						if rng.IntN(3) == 0 {
							continue
						}
						schema := `{"type":"object"}`
						if rng.IntN(2) == 0 {
							schema = `{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}`
						}
						doc.Tools = append(doc.Tools, spec.Tool{Name: fmt.Sprintf("tool_%02d", j),
							Description: fmt.Sprintf("v%d", rng.IntN(2)), InputSchema: json.RawMessage(schema),
							Meta: map[string]any{"k": "v"}})
					}
					toolValues.share(doc.Tools)
					asm := mem.assemble(ts, []*spec.Document{doc}, 0, defaultToolBounds, "")
					var hold holdOutcome
					mem.holdState, hold = nextHold(mem.holdState, holdObservation{scraped: true, tools: asm.tools, revision: asm.revision}, time.Now(), time.Minute)
					offered = hold.offer
				case a < 6: // an outage: the held tools (maybe the table's)
					if !mem.recalled && rng.IntN(2) == 0 {
						held, err := p.Published(ctx, key)
						if err != nil {
							t.Error(err)
							return
						}
						mem.recalled = true
						if len(mem.held) == 0 {
							mem.held = held
						}
					}
					var hold holdOutcome
					mem.holdState, hold = nextHold(mem.holdState, holdObservation{}, time.Now(), time.Minute)
					offered = hold.offer
				case a < 7: // restatus: the last offer again
					if last.ToolSet.Name != "" {
						if _, err := p.Offer(ctx, last); err != nil {
							t.Error(err)
							return
						}
					}
					continue
				case a < 8: // the contract baseline
					tools, err := p.Published(ctx, key)
					if err != nil {
						t.Error(err)
						return
					}
					base := baselineOf(tools, nil)
					for _, old := range mem.baseline {
						if cur, ok := findTool(base, old.Name); ok && digestOf(old) != digestOf(*cur) {
							_ = contract.Breaking(contract.Compare(contract.FromTableTool(old), contract.FromTableTool(*cur)))
						}
					}
					mem.baseline = base
					continue
				case a < 9:
					if _, err := p.Retain(ctx, key); err != nil {
						t.Error(err)
					}
					_ = p.Written(key)
					continue
				default:
					if round%5 == 0 {
						if err := p.Withdraw(ctx, key); err != nil {
							t.Error(err)
							return
						}
						continue
					}
				}
				if rng.IntN(3) == 0 && len(offered) > 0 {
					offered = withoutEndpoints(offered)
				}
				last = Offer{ToolSet: key, Created: ts.CreationTimestamp, UID: ts.UID, Tools: offered,
					Denied: overToolSetBudget(offered, 6)}
				if _, err := p.Offer(ctx, last); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var reads, entries atomic.Int64
	// Policies, and the ceilings a table too large sets.
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var policies []ownership.Policy
			if i%2 == 0 {
				policies = []ownership.Policy{{Name: "reserve", Names: []string{"tool_0*"}, Namespaces: []string{"tenant-1"}}}
			}
			if err := p.SetPolicies(ctx, policies); err != nil {
				t.Error(err)
			}
			switch i % 3 {
			case 0:
				p.tighten()
			case 1:
				p.tightenLayout(&spec.TableLayoutError{Capacity: 4000, MaxSegments: 1})
			default:
				p.relax()
			}
			time.Sleep(time.Millisecond)
		}
	})
	// Readers of the table, besides the flush loop.
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tools, recs, ok := p.tableTools()
				if !ok {
					continue
				}
				reads.Add(1)
				entries.Add(int64(len(tools)))
				if len(tools) != len(recs) {
					t.Errorf("%d entries, %d records", len(tools), len(recs))
					return
				}
				for k := range tools {
					if k > 0 && strings.Compare(tools[k-1].Name, tools[k].Name) >= 0 {
						t.Errorf("entries %d and %d out of order: %q, %q", k-1, k, tools[k-1].Name, tools[k].Name)
						return
					}
					if recs[k].Why == "" {
						t.Errorf("entry %q without a record", tools[k].Name)
						return
					}
				}
				if tb, ok := p.table(); ok {
					_ = spec.TableRevision(tb.Tools)
				}
				// Encode what was read, as a write does, after the lock.
				var enc spec.TableEncoder
				if _, err := enc.EncodeTools(tools, "x", spec.TableStored{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// The ToolSets' rounds end on their own; then the rest stop.
	rwg.Wait()
	close(stop)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no read of the table found its writes let through")
	}
	t.Logf("%d reads of %d entries in all; the table is %d bytes as stored", reads.Load(), entries.Load(), p.tables.storedBytes())
	cancel()
	<-done
}
