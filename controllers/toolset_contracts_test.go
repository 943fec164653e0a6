package controllers

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// breakingEvents lists the BreakingChange events about a ToolSet. The
// events API folds a repeated event into a series, so a repeat shows as a
// series, not as a second event.
func breakingEvents(ctx context.Context, g Gomega, ts *v1alpha1.ToolSet) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range eventsFor(ctx, g, ts) {
		if e.Reason == eventBreakingChange {
			out = append(out, e)
		}
	}
	return out
}

// afterScrapes waits until the workload has been scraped n more times, so
// that what those rounds did is in the API server.
func afterScrapes(w *workload, n int64) {
	GinkgoHelper()
	from := w.hits.Load()
	Eventually(w.hits.Load).Should(BeNumerically(">=", from+n))
}

var _ = Describe("The ToolSet reconciler's contract checks", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("raises exactly one BreakingChange event naming the JSON paths, and none for a compatible change", func(ctx context.Context) {
		refund := func(schema string) spec.Tool {
			return spec.Tool{Name: "bc_refund", Description: "Refunds an order.", InputSchema: json.RawMessage(schema)}
		}
		v1 := refund(`{"type":"object","properties":{"id":{"type":"string"},"reason":{"type":"string","enum":["damaged","late","other"]}},"required":["id"]}`)
		w := newWorkload(v1, tool("bc_lookup"))
		createReadyPod(ctx, ns, "bc-0", map[string]string{"app": "bc"}, w.port())
		ts := toolSet(ns, "bc")
		createToolSet(ctx, ts)
		entries := eventuallyInTable(ctx, ts, HaveLen(2))
		Expect(entries[1].Name).To(Equal("bc_refund"))
		Expect(entries[1].SchemaDigest).To(Equal(spec.SchemaDigest(entries[1].InputSchema, entries[1].OutputSchema, entries[1].Annotations, entries[1].Execution)))
		Expect(entries[1].SchemaDigest).To(HavePrefix("sha256:"))

		By("a compatible change: a new optional property")
		v2 := refund(`{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"},"reason":{"type":"string","enum":["damaged","late","other"]}},"required":["id"]}`)
		w.setTools(v2, tool("bc_lookup"))
		eventuallyInTable(ctx, ts, ContainElement(And(HaveField("Name", "bc_refund"),
			HaveField("SchemaDigest", Not(Equal(entries[1].SchemaDigest))))))
		afterScrapes(w, 2)
		Expect(breakingEvents(ctx, Default, ts)).To(BeEmpty())
		for _, t := range getToolSet(ctx, Default, ts).Status.Tools {
			Expect(t.LastBreakingChange).To(BeNil(), "tool %s", t.Name)
		}

		By("a breaking change: a new required property, a narrowed enum and a removed tool")
		v3 := refund(`{"type":"object","properties":{"amount":{"type":"number"},"id":{"type":"string"},"note":{"type":"string"},"reason":{"type":"string","enum":["damaged","late"]}},"required":["id","amount"]}`)
		w.setTools(v3)
		var got []eventsv1.Event
		Eventually(func(g Gomega) {
			got = breakingEvents(ctx, g, ts)
			g.Expect(got).NotTo(BeEmpty())
		}).Should(Succeed())
		afterScrapes(w, 2)
		got = breakingEvents(ctx, Default, ts)
		Expect(got).To(HaveLen(1))
		Expect(got[0].Series).To(BeNil(), "the event was repeated")
		Expect(got[0].Type).To(Equal("Warning"))
		Expect(got[0].Note).To(ContainSubstring(`bc_refund: inputSchema.properties.amount: property "amount" was added and is required`))
		Expect(got[0].Note).To(ContainSubstring(`bc_refund: inputSchema.properties.reason: enum values removed: "other"`))
		Expect(got[0].Note).To(ContainSubstring("bc_lookup: the tool was removed"))
		Expect(got[0].Note).NotTo(ContainSubstring("note"), "a compatible change is no breaking one")

		st := getToolSet(ctx, Default, ts).Status
		Expect(st.Tools).To(HaveLen(1))
		bc := st.Tools[0].LastBreakingChange
		Expect(bc).NotTo(BeNil())
		Expect(bc.Revision).To(Equal(st.Revision))
		Expect(bc.Time.IsZero()).To(BeFalse())
		Expect(bc.Message).To(ContainSubstring("inputSchema.properties.amount"))

		By("the record stays through later compatible changes")
		v4 := v3
		v4.Description = "Refunds an order, in part or in full."
		w.setTools(v4)
		Eventually(func(g Gomega) {
			g.Expect(getToolSet(ctx, g, ts).Status.Revision).To(Equal(w.revision()))
		}).Should(Succeed())
		afterScrapes(w, 1)
		Expect(getToolSet(ctx, Default, ts).Status.Tools[0].LastBreakingChange).To(Equal(bc))
		Expect(breakingEvents(ctx, Default, ts)).To(HaveLen(1))
	})
})
