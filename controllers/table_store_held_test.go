package controllers

import (
	"context"
	"maps"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var _ = Describe("The tool table store, holding what it wrote", func() {
	It("holds the chunks it sent, not the API server's copies of them", func(ctx context.Context) {
		ns := newNamespace(ctx)
		store := &configMapTable{client: k8sClient, reader: k8sClient, namespace: ns, name: "tools"}
		first, second := []byte("the first chunk"), []byte("the second chunk")

		bin := map[string][]byte{"a": first}
		created, err := store.put(ctx, nil, "tools-1", nil, bin)
		Expect(err).NotTo(HaveOccurred())
		Expect(store.held).To(HaveKeyWithValue("tools-1", BeIdenticalTo(created)))
		Expect(created.BinaryData).To(Equal(bin))
		Expect(sameBytes(created.BinaryData["a"], first)).To(BeTrue(), "the created ConfigMap holds the API server's copy of the chunk")

		data, bin := map[string]string{"index": "{}"}, map[string][]byte{"a": first, "b": second}
		updated, err := store.put(ctx, created, "tools-1", data, bin)
		Expect(err).NotTo(HaveOccurred())
		Expect(store.held).To(HaveKeyWithValue("tools-1", BeIdenticalTo(updated)))
		Expect(updated.ResourceVersion).NotTo(Equal(created.ResourceVersion))
		Expect(updated.Data).To(Equal(data))
		Expect(updated.BinaryData).To(Equal(bin))
		Expect(sameBytes(updated.BinaryData["a"], first)).To(BeTrue(), "the updated ConfigMap holds the API server's copy of the chunk")
		Expect(sameBytes(updated.BinaryData["b"], second)).To(BeTrue(), "the updated ConfigMap holds the API server's copy of the chunk")

		// What it holds is what is stored: the next list reads nothing again
		// and returns it.
		table, _, err := store.list(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(table).To(HaveLen(1))
		Expect(table[0].BinaryData).To(Equal(bin))
	})

	It("holds what the API server stored when that is not what it sent", func(ctx context.Context) {
		ns := newNamespace(ctx)
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		// A mutating webhook, as far as the store can tell: the object
		// stored is not the one sent.
		mutate := func(obj client.Object) {
			cm := obj.(*corev1.ConfigMap)
			cm.BinaryData = maps.Clone(cm.BinaryData)
			cm.BinaryData["a"] = []byte("rewritten on the way in")
		}
		mutating := interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				mutate(obj)
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				mutate(obj)
				return c.Update(ctx, obj, opts...)
			},
		})
		store := &configMapTable{client: mutating, reader: k8sClient, namespace: ns, name: "tools"}
		sent := []byte("the chunk sent")

		for _, cur := range []*corev1.ConfigMap{nil, {}} {
			if cur != nil {
				cur = store.held["tools-1"]
			}
			bin := map[string][]byte{"a": sent}
			cm, err := store.put(ctx, cur, "tools-1", nil, bin)
			Expect(err).NotTo(HaveOccurred())
			Expect(store.held["tools-1"].BinaryData).To(HaveKeyWithValue("a", []byte("rewritten on the way in")))
			Expect(sameBytes(cm.BinaryData["a"], sent)).To(BeFalse())
			Expect(bin).To(HaveKeyWithValue("a", sent), "the map sent is left as it was")
		}
	})
})
