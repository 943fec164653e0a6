package controllers

import (
	"context"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

var _ = Describe("A ToolSet index under the namespace only", func() {
	It("lists as IndexField's in a namespace, with one key a value instead of two", func(ctx SpecContext) {
		c := newIndexCache()
		Expect(indexInNamespace(ctx, c, &v1alpha1.ToolSet{}, "ours", serviceNameIndexValues)).To(Succeed())
		Expect(c.IndexField(ctx, &v1alpha1.ToolSet{}, "theirs", serviceNameIndexValues)).To(Succeed())
		Expect(indexInNamespace(ctx, c, &v1alpha1.ToolSet{}, "ours-selector", selectorIndexValues)).To(Succeed())
		Expect(c.IndexField(ctx, &v1alpha1.ToolSet{}, "theirs-selector", selectorIndexValues)).To(Succeed())
		startIndexedCache(ctx, c)

		one, two := newNamespace(ctx), newNamespace(ctx)
		for _, ts := range []struct{ ns, name, service string }{
			{one, "a", "crm"}, {one, "b", "crm"}, {one, "c", "billing"}, {two, "d", "crm"},
		} {
			createToolSet(ctx, &v1alpha1.ToolSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ts.ns, Name: ts.name},
				Spec: v1alpha1.ToolSetSpec{
					Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": ts.name}},
					Port:     intstr.FromInt32(8080),
					Service:  &v1alpha1.ServiceReference{Name: ts.service, Port: 80},
				},
			})
		}
		// A selector of two values in one expression: two keys.
		createToolSet(ctx, &v1alpha1.ToolSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: one, Name: "e"},
			Spec: v1alpha1.ToolSetSpec{
				Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
				}},
				Port: intstr.FromInt32(8080),
			},
		})
		names := func(g Gomega, field, ns, service string) []string {
			var list v1alpha1.ToolSetList
			g.Expect(c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{field: service})).To(Succeed())
			var out []string
			for _, ts := range list.Items {
				out = append(out, ts.Name)
			}
			slices.Sort(out)
			return out
		}
		want := []struct {
			ns, service string
			names       []string
		}{
			{one, "crm", []string{"a", "b"}}, {one, "billing", []string{"c"}}, {two, "crm", []string{"d"}}, {two, "billing", nil},
		}
		Eventually(func(g Gomega) {
			for _, w := range want {
				g.Expect(names(g, "theirs", w.ns, w.service)).To(Equal(w.names), "IndexField's index, in %s for %s", w.ns, w.service)
				g.Expect(names(g, "ours", w.ns, w.service)).To(Equal(w.names), "indexInNamespace's index, in %s for %s", w.ns, w.service)
			}
			for _, label := range []string{"app=x", "app=y", "app=a"} {
				want := map[string][]string{"app=x": {"e"}, "app=y": {"e"}, "app=a": {"a"}}[label]
				g.Expect(names(g, "theirs-selector", one, label)).To(Equal(want), "IndexField's selector index, for %s", label)
				g.Expect(names(g, "ours-selector", one, label)).To(Equal(want), "indexInNamespace's selector index, for %s", label)
				g.Expect(names(g, "ours-selector", two, label)).To(BeEmpty(), "another namespace, for %s", label)
			}
		}).Should(Succeed())

		inf, err := c.GetInformer(ctx, &v1alpha1.ToolSet{})
		Expect(err).NotTo(HaveOccurred())
		ix := inf.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer()
		keysIn := func(index string, prefixes ...string) []string {
			var out []string
			for _, k := range ix.ListIndexFuncValues(index) {
				for _, p := range prefixes {
					if strings.HasPrefix(k, p+"/") {
						out = append(out, k)
					}
				}
			}
			slices.Sort(out)
			return out
		}
		Expect(keysIn("field:ours", one, two)).To(ConsistOf(one+"/billing", one+"/crm", two+"/crm"))
		Expect(keysIn("field:theirs", one, two)).To(Equal(keysIn("field:ours", one, two)),
			"the keys of a namespace are IndexField's, which its List reads")
		Expect(keysIn("field:ours", "__all_namespaces")).To(BeEmpty(), "a key across all namespaces, which no reconcile lists by")
		Expect(keysIn("field:theirs", "__all_namespaces")).To(ContainElements("__all_namespaces/crm", "__all_namespaces/billing"),
			"IndexField no longer keys values across namespaces: indexInNamespace saves nothing")
	})
})

var _ = Describe("An index of a cluster-scoped kind under indexInNamespace", func() {
	It("keys its objects as IndexField does, and lists them across the cluster", func(ctx SpecContext) {
		c := newIndexCache()
		firstName := func(o client.Object) []string { return o.(*v1alpha1.ToolNamePolicy).Spec.Names[:1] }
		Expect(indexInNamespace(ctx, c, &v1alpha1.ToolNamePolicy{}, "ours", firstName)).To(Succeed())
		Expect(c.IndexField(ctx, &v1alpha1.ToolNamePolicy{}, "theirs", firstName)).To(Succeed())
		startIndexedCache(ctx, c)

		// A name no other spec's policy reserves, in a namespace of its
		// own, so that the policy holds nothing another spec publishes.
		ns := newNamespace(ctx)
		name := "index-" + ns + "_tool"
		createPolicy(ctx, "index-"+ns, []string{name}, []string{ns})
		Eventually(func(g Gomega) {
			for _, field := range []string{"theirs", "ours"} {
				var list v1alpha1.ToolNamePolicyList
				g.Expect(c.List(ctx, &list, client.MatchingFields{field: name})).To(Succeed())
				g.Expect(list.Items).To(HaveLen(1), "the %s index", field)
				g.Expect(list.Items[0].Name).To(Equal("index-" + ns))
			}
		}).Should(Succeed())
	})
})

// newIndexCache is a cache of the whole cluster, whose indexes a spec adds
// before startIndexedCache.
func newIndexCache() cache.Cache {
	GinkgoHelper()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// startIndexedCache starts c until the spec ends and waits for it to sync.
func startIndexedCache(ctx context.Context, c cache.Cache) {
	GinkgoHelper()
	cctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() { _ = c.Start(cctx) }()
	Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
}
