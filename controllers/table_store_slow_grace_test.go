package controllers

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The store's grace under a slow API server", func() {
	// writeTools takes now once, at its start, and starts the grace of the
	// chunks the old index named at that now, though the old index stays
	// the one readers get until the base is written, after every part is
	// staged. A write slowed by the API server shortens the grace by its
	// own length.
	It("keeps a chunk an old index named for a whole grace after the new index replaced it", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns + "-a", Name: "a"}
		const grace, slow = time.Minute, 40 * time.Second
		var mu sync.Mutex
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var switched time.Time // when the base, the index, was last written
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		var slowParts atomic.Bool
		before := func(obj client.Object) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != "tools" && slowParts.Load() {
				mu.Lock()
				now = now.Add(slow) // this put takes 40s
				mu.Unlock()
			}
		}
		after := func(obj client.Object) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "tools" {
				mu.Lock()
				switched = now
				mu.Unlock()
			}
		}
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		c := interceptor.NewClient(wc, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				before(obj)
				err := c.Create(ctx, obj, opts...)
				if err == nil {
					after(obj)
				}
				return err
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				before(obj)
				err := c.Update(ctx, obj, opts...)
				if err == nil {
					after(obj)
				}
				return err
			},
		})
		store := &configMapTable{
			client: c, reader: k8sClient, namespace: ns, name: "tools",
			grace: grace, collectDelay: grace / 2, now: clock, gauges: newTableGauges(),
		}
		write := func(tools []spec.TableTool) {
			GinkgoHelper()
			_, err := store.write(ctx, &spec.Table{Tools: tools})
			Expect(err).NotTo(HaveOccurred())
		}
		stored := func() (base *corev1.ConfigMap, refs map[string]bool) {
			GinkgoHelper()
			cms, err := tableConfigMaps(ctx, ns)
			Expect(err).NotTo(HaveOccurred())
			refs = map[string]bool{}
			for i := range cms {
				if cms[i].Name == "tools" {
					base = &cms[i]
					continue
				}
				for k := range keysOf(cms[i].Data, cms[i].BinaryData) {
					refs[cms[i].Name+"/"+k] = true
				}
			}
			return base, refs
		}

		tools := noisyTools(ts, "t", 2500)
		write(tools)
		_, refs := stored()
		Expect(refs).NotTo(BeEmpty(), "the table is split")

		By("a change written while each part's put takes 40s")
		tools[len(tools)/2].Description += " Also archived ones."
		slowParts.Store(true)
		write(tools)
		slowParts.Store(false)
		base, refs := stored()
		named := namedKeys(base)
		var old []string
		for ref := range refs {
			if !named[ref] {
				old = append(old, ref)
			}
		}
		Expect(old).NotTo(BeEmpty(), "the change left an old chunk")

		By("the next write, a second short of a grace after the index stopped naming the old chunk")
		mu.Lock()
		now = switched.Add(grace - time.Second)
		mu.Unlock()
		tools[len(tools)/2].Description += " And deleted ones."
		write(tools)
		_, refs = stored()
		for _, ref := range old {
			Expect(refs).To(HaveKey(ref), "chunk %s removed %v after the index stopped naming it, within its grace of %v", ref, grace-time.Second, grace)
		}
	})
})
