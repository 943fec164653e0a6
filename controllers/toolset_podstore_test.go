package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("The ready Pods of a ToolSet, read from the informer", func() {
	It("are the informer's own objects, ready and selected, sorted by name", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		c, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: TrimPodForCache},
		}})
		Expect(err).NotTo(HaveOccurred())
		store, err := podStoreOf(ctx, c)
		Expect(err).NotTo(HaveOccurred())
		Expect(store).NotTo(BeNil(), "a cache of the whole cluster keeps one Pod informer, read in place")
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = c.Start(cctx) }()
		Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

		app := map[string]string{"app": "podstore"}
		createReadyPod(ctx, ns, "b", app, 8080)
		createReadyPod(ctx, ns, "a", app, 8080)
		notReady := createReadyPod(ctx, ns, "c", app, 8080)
		setPodReady(ctx, notReady, false)
		createReadyPod(ctx, ns, "other", map[string]string{"app": "else"}, 8080)

		sel := labels.SelectorFromSet(app)
		Eventually(func(g Gomega) {
			pods, err := store.ready(ns, sel)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podNames(pods)).To(Equal([]string{"a", "b"}))
			g.Expect(store.indexer.ByIndex(toolscache.NamespaceIndex, ns)).To(HaveLen(4))
		}).Should(Succeed())
		pods, err := store.ready(ns, sel)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods {
			held, exists, err := store.indexer.GetByKey(ns + "/" + p.Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(exists).To(BeTrue())
			Expect(held).To(BeIdenticalTo(p), "a copy of the Pod instead of the informer's object")
			Expect(p.Spec.Containers).To(HaveLen(1), "the informer's object, trimmed by the transform")
		}
	})

	It("are listed by the client when the cache keeps an informer per namespace", func(ctx SpecContext) {
		c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{
			"one": {}, "two": {},
		}})
		Expect(err).NotTo(HaveOccurred())
		store, err := podStoreOf(ctx, c)
		Expect(err).NotTo(HaveOccurred())
		Expect(store).To(BeNil())
	})

	It("is what the reconciler the manager set up reads", func(ctx SpecContext) {
		// As a reconcile does: after the manager's cache started.
		Expect(toolSetReconciler.podCache.WaitForCacheSync(ctx)).To(BeTrue())
		ns := newNamespace(ctx)
		app := map[string]string{"app": "podstore"}
		createReadyPod(ctx, ns, "a", app, 8080)
		Eventually(func(g Gomega) {
			pods, err := toolSetReconciler.readyPods(ctx, ns, labels.SelectorFromSet(app))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podNames(pods)).To(Equal([]string{"a"}))
		}).Should(Succeed())
		Expect(toolSetReconciler.podStore).NotTo(BeNil())
	})
})

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
