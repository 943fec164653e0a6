package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The admin ceilings", func() {
	It("deny a ToolSet's tools past its budget as OverBudget while the rest of the cluster keeps publishing, and every write succeeds", func(ctx context.Context) {
		failuresBefore := testutil.ToFloat64(tableWriteFailures)
		other := newNamespace(ctx)
		ow := newWorkload(tool("neighbour_keeps_this"))
		createReadyPod(ctx, other, "n-0", map[string]string{"app": "n"}, ow.port())
		neighbour := toolSet(other, "n")
		createToolSet(ctx, neighbour)

		ns := newNamespace(ctx)
		var tools []spec.Tool
		for i := range testMaxToolsPerToolSet + 5 {
			tools = append(tools, tool(fmt.Sprintf("bloat_%03d", i)))
		}
		w := newWorkload(tools...)
		createReadyPod(ctx, ns, "b-0", map[string]string{"app": "b"}, w.port())
		bloat := toolSet(ns, "b")
		createToolSet(ctx, bloat)

		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, bloat)
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(testMaxToolsPerToolSet))
			var denied []string
			for _, t := range got.Status.Tools {
				if t.State == v1alpha1.ToolDenied {
					g.Expect(t.Reason).To(HavePrefix(ownership.OverBudget + ": "))
					denied = append(denied, t.Name)
				}
			}
			// The last by name are the ones denied.
			g.Expect(denied).To(ConsistOf("bloat_040", "bloat_041", "bloat_042", "bloat_043", "bloat_044"))
			g.Expect(condition(got, v1alpha1.ConditionClamped).Message).To(ContainSubstring("--max-tools-per-toolset"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(tableEntries(ctx, g, types.NamespacedName{Namespace: ns, Name: "b"})).To(HaveLen(testMaxToolsPerToolSet))
			g.Expect(tableEntries(ctx, g, types.NamespacedName{Namespace: other, Name: "n"})).To(HaveLen(1))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(ctx, g, bloat)).To(ContainElement(eventNameDenied))
		}).Should(Succeed())
		Expect(readyCondition(getToolSet(ctx, Default, neighbour)).Status).To(Equal(metav1.ConditionTrue))
		Expect(testutil.ToFloat64(tableWriteFailures)).To(Equal(failuresBefore), "every table write succeeded")
	})

	It("count a failed table write in a metric and record it on the table's ConfigMap, and its recovery", func(ctx context.Context) {
		ns := newNamespace(ctx)
		before := testutil.ToFloat64(tableWriteFailures)
		var failing atomic.Bool
		failing.Store(true)
		refuse := errors.New("etcdserver: request is too large")
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		flaky := interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if failing.Load() {
					return refuse
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if failing.Load() {
					return refuse
				}
				return c.Update(ctx, obj, opts...)
			},
		})
		recorder := events.NewFakeRecorder(10)
		rp, _ := startPublisherWith(ns, ns, 0, &writeLog{}, flaky, func(p *TablePublisher) { p.Recorder = recorder })
		crm := types.NamespacedName{Namespace: "crm", Name: "tools"}
		rp.offer(ctx, crm, time.Now(), manyTools(crm, "crm", 3)...)

		Eventually(func() float64 { return testutil.ToFloat64(tableWriteFailures) }).Should(BeNumerically(">", before))
		Eventually(recorder.Events).Should(Receive(And(ContainSubstring(eventTableWriteFailed), ContainSubstring("request is too large"))))
		failing.Store(false)
		Eventually(recorder.Events).WithTimeout(time.Minute).Should(Receive(ContainSubstring(eventTableWriteRecovered)))
		Eventually(func(g Gomega) {
			t, _, err := storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(3))
		}).Should(Succeed())
	})

	Context("that need the whole cluster's view", func() {
		var ns string
		BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

		It("keep a namespace within its tools and the table within its bytes, at the expense of whoever bloats it", func(ctx context.Context) {
			budget := ownership.Budget{MaxToolsPerNamespace: 30, MaxTableBytes: 48 << 10}
			rp, _ := startPublisherWith(ns, ns, 0, &writeLog{}, k8sClient, func(p *TablePublisher) { p.Budget = budget })
			epoch := time.Now().Add(-time.Hour)
			key := func(n, name string) types.NamespacedName { return types.NamespacedName{Namespace: n, Name: name} }

			// Small, well-behaved namespaces.
			crm, weather := key("crm", "tools"), key("weather", "tools")
			rp.offer(ctx, crm, epoch, manyTools(crm, "crm", 10)...)
			rp.offer(ctx, weather, epoch, manyTools(weather, "weather", 10)...)
			// A namespace with an early ToolSet and a later one that pushes it
			// past 30 tools, each tool of them heavy.
			heavy := func(ts types.NamespacedName, prefix string, n int) []spec.TableTool {
				tools := manyTools(ts, prefix, n)
				for i := range tools {
					tools[i].Description += strings.Repeat(" padding", 200)
				}
				return tools
			}
			early, late := key("bloat", "early"), key("bloat", "late")
			rp.offer(ctx, early, epoch.Add(time.Minute), heavy(early, "early", 20)...)
			rp.offer(ctx, late, epoch.Add(2*time.Minute), heavy(late, "late", 20)...)

			var table *spec.Table
			Eventually(func(g Gomega) {
				t, cms, err := storedTable(ctx, ns)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cms).NotTo(BeEmpty())
				table = t
				perNS := map[string]int{}
				for _, tt := range t.Tools {
					perNS[tt.ToolSet.Namespace]++
				}
				// Everyone else keeps every tool.
				g.Expect(perNS["crm"]).To(Equal(10))
				g.Expect(perNS["weather"]).To(Equal(10))
				g.Expect(perNS["bloat"]).To(BeNumerically("<=", 30))
				g.Expect(perNS["bloat"]).To(BeNumerically(">", 0))
			}).Should(Succeed())
			var size int64
			for _, tt := range table.Tools {
				b, err := json.Marshal(tt)
				Expect(err).NotTo(HaveOccurred())
				size += int64(len(b) + 1)
			}
			Expect(size).To(BeNumerically("<=", budget.MaxTableBytes))

			// The owners are told, and their verdicts say OverBudget: the later
			// ToolSet's tools go first.
			Eventually(rp.changedEvents).Should(ContainElement(late))
			verdicts, err := rp.Offer(ctx, Offer{ToolSet: late, Created: metav1.NewTime(epoch.Add(2 * time.Minute)), Tools: heavy(late, "late", 20)})
			Expect(err).NotTo(HaveOccurred())
			denied := 0
			for _, v := range verdicts {
				if v.State == ownership.Denied {
					Expect(v.Policy).To(Equal(ownership.OverBudget))
					denied++
				}
			}
			Expect(denied).To(Equal(20), "the later ToolSet of the namespace past its budget loses all its tools")
			verdicts, err = rp.Offer(ctx, Offer{ToolSet: crm, Created: metav1.NewTime(epoch), Tools: manyTools(crm, "crm", 10)})
			Expect(err).NotTo(HaveOccurred())
			for name, v := range verdicts {
				Expect(v.State).To(Equal(ownership.Owned), name)
			}
		})
	})
})
