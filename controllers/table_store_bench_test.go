package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// storeCost counts what a store's writes cost, as the API server stores
// them: the writes, their bytes, and the bytes of the ledger among them.
type storeCost struct {
	writes, bytes, ledger int
}

// The ledger's keys, as strings: the form beside the table and the form
// in chunks, so that the benchmark reads both layouts.
var benchLedgerKeys = []string{"tools.ledger.json.gz", "ledger.json.gz"}

func (c *storeCost) add(obj client.Object) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	c.writes++
	c.bytes += spec.TablePart{Data: cm.Data, BinaryData: cm.BinaryData}.StoredSize()
	for _, k := range benchLedgerKeys {
		if v, ok := cm.BinaryData[k]; ok {
			c.ledger += spec.TablePart{BinaryData: map[string][]byte{k: v}}.StoredSize()
		}
	}
}

// benchStore returns a store on a fake API server that counts the writes
// into cost.
func benchStore(cost *storeCost, now *time.Time) *configMapTable {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			cost.add(obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			cost.add(obj)
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	// No grace: the old chunks go with the next write, so every write of
	// the loop is a steady one.
	return &configMapTable{client: c, reader: c, namespace: "toolplane-system", name: "toolplane-tools",
		grace: 0, now: func() time.Time { return *now }}
}

// benchTable returns the table of bench-scale: 1,000 ToolSets of ten
// tools, every name claimed by its ToolSet at its own second.
func benchTable() ([]spec.TableTool, []spec.TableRecord) {
	rng := rand.New(rand.NewPCG(27, 23))
	words := strings.Fields("the a of to and for with from by in on at returns matching records customer order invoice status region currency amount date range page limit cursor filter sort field value active archived")
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var tools []spec.TableTool
	var records []spec.TableRecord
	for i := range 1000 {
		ts := types.NamespacedName{Namespace: fmt.Sprintf("bench-%02d", i%50), Name: fmt.Sprintf("set-%04d", i)}
		for j := range 10 {
			name := fmt.Sprintf("s%04d_tool_%02d", i, j)
			e := entry(ts, name, name)
			var d strings.Builder
			for range 30 {
				d.WriteString(words[rng.IntN(len(words))])
				d.WriteByte(' ')
			}
			e.Description = d.String()
			e.ToolSetUID = fmt.Sprintf("uid-%04d", i)
			tools = append(tools, e)
			records = append(records, spec.TableRecord{Since: at.Add(time.Duration(i) * time.Second), Why: "Claimed"})
		}
	}
	return tools, records
}

// BenchmarkTableStoreWrite measures one write of the 10,000-tool table of
// bench-scale to a fake API server, after one change: "content" changes a
// tool's description (the churn of bench-scale), "owner" hands a tool to
// another ToolSet. written-B/op is what the API server stores for the
// write, ledger-B/op the part of it that is the ledger's, writes/op the
// ConfigMaps written.
func BenchmarkTableStoreWrite(b *testing.B) {
	for _, change := range []string{"content", "owner"} {
		b.Run(change, func(b *testing.B) {
			tools, records := benchTable()
			ptrs := make([]*spec.TableTool, len(tools))
			for i := range tools {
				ptrs[i] = &tools[i]
			}
			cost := &storeCost{}
			now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
			s := benchStore(cost, &now)
			ctx := context.Background()
			if _, err := s.writeTools(ctx, ptrs, records); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			*cost = storeCost{}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				now = now.Add(time.Second)
				i := rng.IntN(len(tools))
				t := *ptrs[i]
				switch change {
				case "content":
					t.Description = fmt.Sprintf("Changed %d. %s", n, tools[i].Description)
				case "owner":
					t.ToolSet = spec.ObjectReference{Namespace: "elsewhere", Name: fmt.Sprintf("other-%d", n)}
					t.ToolSetUID = fmt.Sprintf("uid-other-%d", n)
					records[i] = spec.TableRecord{Since: now, Why: "HandedOver"}
				}
				ptrs[i] = &t
				if _, err := s.writeTools(ctx, ptrs, records); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(cost.bytes)/float64(n), "written-B/op")
			b.ReportMetric(float64(cost.ledger)/float64(n), "ledger-B/op")
			b.ReportMetric(float64(cost.writes)/float64(n), "writes/op")
		})
	}
}
