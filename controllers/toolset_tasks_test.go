package controllers

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The ToolSet reconciler and MCP tasks", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("publishes execution.taskSupport, refuses one MCP does not define, and calls a change to required breaking", func(ctx context.Context) {
		task := func(name, support string) spec.Tool {
			return spec.Tool{Name: name, Description: "Runs long.", InputSchema: json.RawMessage(`{"type":"object"}`),
				Execution: &spec.Execution{TaskSupport: support}}
		}
		// Hand-written: toolkit itself refuses to declare the bad one.
		w := newHandWrittenWorkload(task("tk_report", spec.TaskSupportOptional), task("tk_bad", "always"))
		createReadyPod(ctx, ns, "tk-0", map[string]string{"app": "tk"}, w.port())
		ts := toolSet(ns, "tk")
		createToolSet(ctx, ts)
		entries := eventuallyInTable(ctx, ts, HaveLen(1))
		Expect(entries[0].Name).To(Equal("tk_report"))
		Expect(entries[0].Execution).To(Equal(&spec.Execution{TaskSupport: spec.TaskSupportOptional}))
		Expect(entries[0].SchemaDigest).To(Equal(spec.SchemaDigest(entries[0].InputSchema, nil, nil, entries[0].Execution)))
		Eventually(func(g Gomega) {
			var bad *v1alpha1.ToolStatus
			for i, t := range getToolSet(ctx, g, ts).Status.Tools {
				if t.Name == "tk_bad" {
					bad = &getToolSet(ctx, g, ts).Status.Tools[i]
				}
			}
			g.Expect(bad).NotTo(BeNil())
			g.Expect(bad.State).To(Equal(v1alpha1.ToolInvalid))
			g.Expect(bad.Reason).To(ContainSubstring(`execution.taskSupport must be "forbidden", "optional" or "required", not "always"`))
		}).Should(Succeed())

		By("task support becomes required: callers that call it the ordinary way break")
		w.setTools(task("tk_report", spec.TaskSupportRequired))
		Eventually(func(g Gomega) {
			got := breakingEvents(ctx, g, ts)
			g.Expect(got).To(HaveLen(1))
			g.Expect(got[0].Note).To(ContainSubstring("tk_report: execution.taskSupport: task support changed from optional to required"))
		}).Should(Succeed())
		entries = eventuallyInTable(ctx, ts, ContainElement(HaveField("Execution", Equal(&spec.Execution{TaskSupport: spec.TaskSupportRequired}))))
		Expect(entries).To(HaveLen(1))
	})
})
