package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// incompressible returns n bytes of text that gzip cannot shrink much:
// random letters of a 64-letter alphabet, about 6 bits in every 8.
func incompressible(rng *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

var _ = Describe("The tool table at capacity", func() {
	It("publishes a healthy tenant's change within one interval while incompressible tools fill its ConfigMaps, and denies the heavy tools as OverBudget, naming the ceiling", func(ctx context.Context) {
		// Three ConfigMaps (the base and two chunks of 188 KiB) instead of
		// 64, so that a few ToolSets fill them: the shape is the same as 6
		// tenants of 2 MiB each against the production 64.
		publisher.parts.Store(3)
		DeferCleanup(func() { publisher.parts.Store(0) })
		failuresBefore := testutil.ToFloat64(tableWriteFailures)

		healthyNS := newNamespace(ctx)
		hw := newWorkload(tool("healthy_first"))
		createReadyPod(ctx, healthyNS, "h-0", map[string]string{"app": "h"}, hw.port())
		healthy := toolSet(healthyNS, "h")
		createToolSet(ctx, healthy)
		Eventually(func(g Gomega) {
			g.Expect(tableEntries(ctx, g, types.NamespacedName{Namespace: healthyNS, Name: "h"})).To(HaveLen(1))
		}).Should(Succeed())

		// One workload, 8 tools of 7 KiB of noise (56 KiB, within the
		// suite's response limit), served to 12 ToolSets in two
		// namespaces: 672 KiB of JSON, some 500 KiB gzipped, where three
		// ConfigMaps hold about 376 KiB.
		rng := rand.New(rand.NewPCG(23, 1))
		var noisy []spec.Tool
		for i := range 8 {
			t := tool(fmt.Sprintf("noise_%d", i))
			t.Description = incompressible(rng, 7<<10)
			noisy = append(noisy, t)
		}
		hv := newWorkload(noisy...)
		heavyA, heavyB := newNamespace(ctx), newNamespace(ctx)
		var heavy []*v1alpha1.ToolSet
		for i := range 12 {
			ns := heavyA
			if i >= 7 {
				ns = heavyB
			}
			name := fmt.Sprintf("heavy-%d", i)
			createReadyPod(ctx, ns, name+"-0", map[string]string{"app": name}, hv.port())
			ts := toolSet(ns, name)
			ts.Spec.Prefix = fmt.Sprintf("h%02d_", i)
			createToolSet(ctx, ts)
			heavy = append(heavy, ts)
		}

		// Every heavy tool is either in the table and Published, or out of
		// it and Denied (OverBudget, naming the ConfigMaps): none is
		// silently missing, and some are denied.
		Eventually(func(g Gomega) {
			denied := 0
			for _, ts := range heavy {
				got := getToolSet(ctx, g, ts)
				g.Expect(got.Status.Tools).To(HaveLen(len(noisy)), "%s has a verdict on every tool", ts.Name)
				var published []string
				for _, t := range got.Status.Tools {
					switch t.State {
					case v1alpha1.ToolPublished:
						published = append(published, t.Name)
					case v1alpha1.ToolDenied:
						g.Expect(t.Reason).To(HavePrefix(ownership.OverBudget+": "), "%s: %s", ts.Name, t.Name)
						g.Expect(t.Reason).To(ContainSubstring("the 3 ConfigMaps of the tool table"))
						denied++
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
			g.Expect(denied).To(BeNumerically(">", 0))
		}).WithTimeout(60 * time.Second).Should(Succeed())

		// A healthy tenant's change is published within one interval (5s),
		// with room for the scrape and the write.
		hw.setTools(tool("healthy_first"), tool("healthy_second"))
		Eventually(func(g Gomega) {
			var names []string
			for _, e := range tableEntries(ctx, g, types.NamespacedName{Namespace: healthyNS, Name: "h"}) {
				names = append(names, e.Name)
			}
			g.Expect(names).To(Equal([]string{"healthy_first", "healthy_second"}))
			got := getToolSet(ctx, g, healthy)
			for _, t := range got.Status.Tools {
				g.Expect(t.State).To(Equal(v1alpha1.ToolPublished), t.Name)
			}
		}).WithTimeout(8 * time.Second).Should(Succeed())
		Expect(testutil.ToFloat64(tableWriteFailures)).To(Equal(failuresBefore), "no write of the table failed")
	})
})

func keyOf(ts *v1alpha1.ToolSet) types.NamespacedName {
	return types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
}
