package controllers

import (
	"context"
	"net/url"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// selectingService is a ClusterIP Service of ns that selects app's Pods.
func selectingService(ns, name, app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}},
		},
	}
}

func createService(ctx context.Context, svc *corev1.Service) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, svc)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, svc))).To(Succeed())
	})
}

// serviceRefused waits until the ToolSet is not Ready for its Service, its
// tools still published (its names kept) and none with an endpoint.
func serviceRefused(ctx context.Context, ts *v1alpha1.ToolSet, why string, tools int) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := getToolSet(ctx, g, ts)
		ready := readyCondition(got)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonServiceRefused))
		g.Expect(ready.Message).To(ContainSubstring(why))
		// kstatus reads the pair, which agrees with Ready: only a change to
		// the Service unblocks the ToolSet.
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonServiceRefused)))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue())
		entries := tableEntries(ctx, g, client.ObjectKeyFromObject(ts))
		g.Expect(entries).To(HaveLen(tools))
		for _, e := range entries {
			g.Expect(e.Endpoints).To(BeNil())
		}
	}).Should(Succeed())
}

var _ = Describe("A ToolSet's Service", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("is named fully qualified in the endpoints, so that no search path can extend it", func(ctx context.Context) {
		w := newWorkload(tool("query"))
		createReadyPod(ctx, ns, "tools-0", map[string]string{"app": "tools"}, w.port())
		createService(ctx, selectingService(ns, "tools", "tools"))
		ts := toolSet(ns, "tools")
		createToolSet(ctx, ts)
		entries := eventuallyInTable(ctx, ts, HaveLen(1))
		Expect(entries[0].Endpoints).To(Equal(&spec.Endpoints{
			Invoke: "http://tools." + ns + ".svc.cluster.local:8080/tools/query",
			MCP:    "http://tools." + ns + ".svc.cluster.local:8080/mcp",
		}))
		for _, e := range []string{entries[0].Endpoints.Invoke, entries[0].Endpoints.MCP} {
			u, err := discovery.CheckServiceEndpoint(e, ns, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(u.String()).To(Equal(e), "the published name is the one dialed")
		}
	})

	It("is refused when it is an ExternalName alias for another namespace's Service, and routed again once it selects the namespace's Pods", func(ctx context.Context) {
		w := newWorkload(tool("query_customer"))
		createReadyPod(ctx, ns, "evil-0", map[string]string{"app": "evil"}, w.port())
		alias := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "crm-tools.crm.svc.cluster.local"},
		}
		createService(ctx, alias)
		ts := toolSet(ns, "evil")
		createToolSet(ctx, ts)
		serviceRefused(ctx, ts, "ExternalName (crm-tools.crm.svc.cluster.local)", 1)
		Expect(getToolSet(ctx, Default, ts).Status.Tools).To(ConsistOf(toolNamed("query_customer", v1alpha1.ToolPublished)),
			"the names stay owned")

		// The Service now selects the namespace's own Pods: its watch
		// reconciles the ToolSet, and the endpoints come back.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(alias), alias)).To(Succeed())
		alias.Spec = selectingService(ns, "evil", "evil").Spec
		Expect(k8sClient.Update(ctx, alias)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, ts)).Reason).To(Equal(v1alpha1.ReasonPublished))
			entries := tableEntries(ctx, g, client.ObjectKeyFromObject(ts))
			g.Expect(entries).To(HaveLen(1))
			g.Expect(entries[0].Endpoints).NotTo(BeNil())
			g.Expect(entries[0].Endpoints.Invoke).To(Equal("http://evil." + ns + ".svc.cluster.local:8080/tools/query_customer"))
		}).Should(Succeed())

		// And back to an alias: refused again, without a change to the
		// ToolSet.
		Expect(k8sClient.Delete(ctx, alias)).To(Succeed())
		createService(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
		})
		serviceRefused(ctx, ts, "ExternalName (example.com)", 1)
	})

	It("is refused without a selector: the search-path attack, from a namespace called svc, finds no endpoint to hijack", func(ctx context.Context) {
		// A Pod's resolver (ndots:5) tries tools.<ns>.svc first as
		// tools.<ns>.svc.svc.cluster.local: the Pod of hostname tools
		// behind the headless Service <ns> of namespace svc, which its
		// owner writes the addresses of. The victim's endpoint is fully
		// qualified, so no resolver tries that name for it ...
		victim := newWorkload(tool("lookup"))
		createReadyPod(ctx, ns, "tools-0", map[string]string{"app": "tools"}, victim.port())
		createService(ctx, selectingService(ns, "tools", "tools"))
		vts := toolSet(ns, "tools")
		createToolSet(ctx, vts)
		entries := eventuallyInTable(ctx, vts, HaveLen(1))
		u, err := url.Parse(entries[0].Endpoints.Invoke)
		Expect(err).NotTo(HaveOccurred())
		Expect(u.Hostname()).To(Equal("tools." + ns + ".svc.cluster.local"))

		// ... and the attacker's own ToolSet, naming that selector-less
		// Service, gets no endpoint through it either.
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "svc"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		attacker := newWorkload(tool("lookup_hijacked"))
		createReadyPod(ctx, "svc", ns+"-0", map[string]string{"app": ns}, attacker.port())
		createService(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: ns},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		})
		ats := toolSet("svc", ns)
		ats.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": ns}}
		createToolSet(ctx, ats)
		serviceRefused(ctx, ats, "has no selector", 1)
	})

	It("is not refused while it does not exist, and is once it is created as an alias", func(ctx context.Context) {
		w := newWorkload(tool("later"))
		createReadyPod(ctx, ns, "later-0", map[string]string{"app": "later"}, w.port())
		ts := toolSet(ns, "later")
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, ts)).Reason).To(Equal(v1alpha1.ReasonPublished))
		}).Should(Succeed())
		createService(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "later.elsewhere.svc.cluster.local"},
		})
		serviceRefused(ctx, ts, "ExternalName", 1)
	})
})

var _ = Describe("Checking a ToolSet's Service", func() {
	It("asks the API server about a Service the cache lacks once a generation, not every round", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := toolSet(ns, "absent")
		createToolSet(ctx, ts)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), ts)).To(Succeed())

		// A cache that holds no Service until cacheSees is set, and an API
		// reader that counts the Services it reads.
		var cacheSees atomic.Bool
		var apiReads atomic.Int32
		cache := interceptor.NewClient(directClient(), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Service); ok && !cacheSees.Load() {
					return apierrors.NewNotFound(corev1.Resource("services"), key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		api := interceptor.NewClient(directClient(), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Service); ok {
					apiReads.Add(1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		r := &ToolSetReconciler{Client: cache, APIReader: api}
		mem := &toolSetMemory{}

		for range 3 {
			Expect(r.checkService(ctx, ts, mem)).To(BeEmpty(), "a missing Service is not refused")
		}
		Expect(apiReads.Load()).To(BeEquivalentTo(1), "one read confirms the Service is missing; later rounds trust the cache")

		// The Service is created as an alias, and the cache sees it: refused
		// at once, from the cache.
		createService(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "absent"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "crm.elsewhere.svc.cluster.local"},
		})
		cacheSees.Store(true)
		Expect(r.checkService(ctx, ts, mem)).To(ContainSubstring("ExternalName"))
		Expect(apiReads.Load()).To(BeEquivalentTo(1))

		// A new generation whose first round the cache lags for: the API
		// server is asked again, and the alias is refused.
		cacheSees.Store(false)
		patch := client.MergeFrom(ts.DeepCopy())
		ts.Spec.Prefix = "crm_"
		Expect(k8sClient.Patch(ctx, ts, patch)).To(Succeed())
		Expect(ts.Generation).To(BeNumerically(">", 1))
		Expect(r.checkService(ctx, ts, mem)).To(ContainSubstring("ExternalName"))
		Expect(apiReads.Load()).To(BeEquivalentTo(2))
		Expect(r.checkService(ctx, ts, mem)).To(ContainSubstring("ExternalName"), "found is never remembered as missing")
		Expect(apiReads.Load()).To(BeEquivalentTo(3))
	})
})

// directClient reads and writes the test API server directly, uncached.
func directClient() client.WithWatch {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = Describe("TrimServiceForCache", func() {
	It("keeps what the refusal reads, and nothing else", func() {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b", Annotations: map[string]string{"big": "x"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "h.example", Selector: map[string]string{"app": "x"},
				Ports: []corev1.ServicePort{{Port: 1}}},
		}
		got, err := TrimServiceForCache(svc)
		Expect(err).NotTo(HaveOccurred())
		trimmed := got.(*corev1.Service)
		Expect(trimmed.Annotations).To(BeNil())
		Expect(trimmed.Spec.Ports).To(BeNil())
		Expect(serviceRefusal(trimmed)).To(Equal(serviceRefusal(svc)))
		Expect(trimmed.Spec.Selector).To(Equal(svc.Spec.Selector))
	})
})
