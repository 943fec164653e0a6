package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestTableToolsWhileOffersChange reads the table's entries, which
// tableTools sorts after releasing the publisher's lock, while offers
// replace the tools of the ToolSets that own them and move names from one
// owner to another. Every read must be a table: sorted, each name once,
// a record for each entry. Under the race detector (make test), it also
// fails if anything writes the entries a read still holds.
func TestTableToolsWhileOffersChange(t *testing.T) {
	p := loadedPublisher(&TablePublisher{})
	const toolSets, perToolSet = 200, 10
	offer := func(i, round int) {
		ts := types.NamespacedName{Namespace: fmt.Sprintf("ns-%03d", i), Name: "tools"}
		o := Offer{ToolSet: ts, Created: metav1.Unix(int64(i), 0)}
		for j := range perToolSet {
			name := fmt.Sprintf("ts%03d_tool_%02d", i, j)
			if i > 0 && j == 0 && round%2 == 1 {
				// Contested: every odd round, ToolSets also claim a name
				// of the ToolSet before them, which owns it (created
				// earlier) until it stops offering it.
				name = fmt.Sprintf("ts%03d_tool_%02d", i-1, 9)
			}
			o.Tools = append(o.Tools, spec.TableTool{Name: name, SourceName: name, Description: fmt.Sprintf("round %d", round), InputSchema: []byte(`{"type":"object"}`)})
		}
		slices.SortFunc(o.Tools, func(a, b spec.TableTool) int { return strings.Compare(a.Name, b.Name) })
		if _, err := p.Offer(context.Background(), o); err != nil {
			t.Error(err)
		}
	}
	for i := range toolSets {
		offer(i, 0)
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		for round := 1; round <= 20; round++ {
			for i := range toolSets {
				offer(i, round)
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for range 50 {
				tools, records, ok := p.tableTools()
				if !ok {
					t.Error("writes held")
					return
				}
				if len(tools) != len(records) || len(tools) < toolSets*(perToolSet-1) {
					t.Errorf("%d entries, %d records", len(tools), len(records))
					return
				}
				for k := 1; k < len(tools); k++ {
					if strings.Compare(tools[k-1].Name, tools[k].Name) >= 0 {
						t.Errorf("entries %d and %d out of order: %q, %q", k-1, k, tools[k-1].Name, tools[k].Name)
						return
					}
				}
				for k, tt := range tools {
					if !strings.HasPrefix(tt.Description, "round ") || records[k].Why == "" {
						t.Errorf("entry %q: description %q, record %+v", tt.Name, tt.Description, records[k])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
