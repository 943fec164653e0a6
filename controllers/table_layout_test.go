package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The tool table's JSON ceiling", func() {
	It("is what the encoder lays out, not a worst case: the heavy namespace's tools past it are denied as OverBudget naming the segments, never a freeze, and published again once the claims fit", func(ctx context.Context) {
		// Two ConfigMaps (the base and one chunk) instead of 64: an index
		// names one segment of JSON, 512 KiB to 1 MiB, where the bytes
		// alone (no --max-table-bytes here: what readers accept) would
		// let 64 MiB in.
		publisher.parts.Store(2)
		DeferCleanup(func() { publisher.parts.Store(0) })
		failuresBefore := testutil.ToFloat64(tableWriteFailures)

		healthyNS := newNamespace(ctx)
		hw := newWorkload(tool("layout_healthy"))
		createReadyPod(ctx, healthyNS, "h-0", map[string]string{"app": "h"}, hw.port())
		healthy := toolSet(healthyNS, "h")
		createToolSet(ctx, healthy)

		// 8 tools of 6 KiB of prose (48 KiB, within the suite's response
		// limit) served to 24 ToolSets in two namespaces: 1.2 MiB of JSON,
		// more than one segment holds, that gzips to some tens of KiB, well
		// within the chunk's 188 KiB: only the layout refuses it.
		var prose []spec.Tool
		for i := range 8 {
			t := tool(fmt.Sprintf("prose_%d", i))
			t.Description = strings.Repeat(fmt.Sprintf("Tool %d reads the ledger and answers a question about it. ", i), 6<<10/60)
			prose = append(prose, t)
		}
		pw := newWorkload(prose...)
		heavyA, heavyB := newNamespace(ctx), newNamespace(ctx)
		var heavy []*v1alpha1.ToolSet
		for i := range 24 {
			ns := heavyA
			if i >= 14 {
				ns = heavyB
			}
			name := fmt.Sprintf("prose-%d", i)
			createReadyPod(ctx, ns, name+"-0", map[string]string{"app": name}, pw.port())
			ts := toolSet(ns, name)
			ts.Spec.Prefix = fmt.Sprintf("p%02d_", i)
			createToolSet(ctx, ts)
			heavy = append(heavy, ts)
		}

		// Every tool is in the table and Published, or out of it and
		// Denied (OverBudget, naming the segments): some are denied (the
		// newest claims first, of the namespace that weighs most), and the
		// healthy tenant's tool is published.
		verdicts := func(g Gomega, tss []*v1alpha1.ToolSet) (denied map[string]int) {
			denied = map[string]int{}
			for _, ts := range tss {
				got := getToolSet(ctx, g, ts)
				g.Expect(got.Status.Tools).To(HaveLen(len(prose)), "%s has a verdict on every tool", ts.Name)
				var published []string
				for _, t := range got.Status.Tools {
					switch t.State {
					case v1alpha1.ToolPublished:
						published = append(published, t.Name)
					case v1alpha1.ToolDenied:
						g.Expect(t.Reason).To(HavePrefix(ownership.OverBudget+": "), "%s: %s", ts.Name, t.Name)
						g.Expect(t.Reason).To(ContainSubstring("what its index's 1 segments of JSON hold"), "%s: %s", ts.Name, t.Name)
						denied[ts.Namespace]++
					default:
						g.Expect(t.State).To(BeElementOf(v1alpha1.ToolPublished, v1alpha1.ToolDenied), "%s: %s", ts.Name, t.Name)
					}
				}
				var inTable []string
				for _, e := range tableEntries(ctx, g, keyOf(ts)) {
					inTable = append(inTable, e.Name)
				}
				slices.Sort(published)
				g.Expect(inTable).To(Equal(published), "%s: the table holds exactly the tools status calls Published", ts.Name)
			}
			return denied
		}
		Eventually(func(g Gomega) {
			denied := verdicts(g, heavy)
			g.Expect(denied[heavyA] + denied[heavyB]).To(BeNumerically(">", 0))
			g.Expect(tableEntries(ctx, g, keyOf(healthy))).To(HaveLen(1))
		}).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(testutil.ToFloat64(tableWriteFailures)).To(Equal(failuresBefore), "no write of the table failed")

		// Once the claims fit under the ceiling (four ToolSets left, 200
		// KiB), it is dropped and every tool is published.
		for _, ts := range heavy[:20] {
			Expect(k8sClient.Delete(ctx, &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Name}})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(verdicts(g, heavy[20:])).To(BeEmpty())
			publisher.mu.Lock()
			defer publisher.mu.Unlock()
			g.Expect(publisher.layoutCeiling).To(BeZero(), "the layout's ceiling binds nothing")
		}).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(tableEntries(context.Background(), Default, types.NamespacedName{Namespace: healthyNS, Name: "h"})).To(HaveLen(1))
	})
})
