package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The tool table store, repairing itself", func() {
	It("writes a part ConfigMap or a chunk of the ledger deleted from outside again within one interval, with no change of tools", func(ctx context.Context) {
		ns := newNamespace(ctx)
		// The ConfigMap events of the spec's namespace, as the manager's
		// cache delivers those of the table namespace.
		informers, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
		Expect(err).NotTo(HaveOccurred())
		cctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		go func() { _ = informers.Start(cctx) }()
		Expect(informers.WaitForCacheSync(ctx)).To(BeTrue())

		writes := &writeLog{}
		rp, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), func(p *TablePublisher) { p.Informers = informers })
		// 600 KiB of noise: the index and chunk 0 in the base, further
		// chunks in parts.
		ts := types.NamespacedName{Namespace: ns, Name: "noisy"}
		rng := rand.New(rand.NewPCG(3, 4))
		var tools []spec.TableTool
		for i := range 600 {
			e := entry(ts, fmt.Sprintf("noise_%04d", i), fmt.Sprintf("noise_%04d", i))
			e.Description = incompressible(rng, 1<<10)
			tools = append(tools, e)
		}
		rp.offer(ctx, ts, time.Now(), tools...)
		var parts []corev1.ConfigMap
		Eventually(func(g Gomega) {
			t, cms, err := storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(len(tools)))
			g.Expect(len(cms)).To(BeNumerically(">", 1), "the table is split into parts")
			parts = cms
		}).WithTimeout(bigTableTimeout).Should(Succeed())

		// The last part of the table, and the ledger's chunk.
		victims := ledgerConfigMaps(ctx, ns)
		Expect(victims).To(HaveLen(1), "the ledger is one chunk")
		for i := len(parts) - 1; i > 0; i-- {
			if strings.HasPrefix(parts[i].Name, "tools-") {
				victims = append(victims, parts[i])
				break
			}
		}
		Expect(victims).To(HaveLen(2), "the table has a part")
		for _, victim := range victims {
			By("deleting " + victim.Name)
			Expect(k8sClient.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Name}})).To(Succeed())
			// Within one interval (5s, the shortest a ToolSet has), with no
			// offer: the table reads back whole again.
			Eventually(func(g Gomega) {
				t, _, err := storedTable(ctx, ns)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(t.Tools).To(HaveLen(len(tools)))
				var again corev1.ConfigMap
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim.Name}, &again)).To(Succeed())
				g.Expect(again.BinaryData).To(Equal(victim.BinaryData))
			}).WithTimeout(5 * time.Second).Should(Succeed())
		}
	})

	It("writes a burst still pending when the manager stops, within a bound", func(ctx context.Context) {
		ns := newNamespace(ctx)
		writes := &writeLog{}
		rp, stop := startPublisherWith(ns, ns, 0, writes, countingClient(writes), func(p *TablePublisher) {
			// A burst that would wait for a minute.
			p.Debounce, p.MaxDelay = time.Minute, time.Minute
		})
		ts := types.NamespacedName{Namespace: ns, Name: "last-words"}
		rp.offer(ctx, ts, time.Now(), entry(ts, "said_before_stop", "said_before_stop"))
		Consistently(func() map[string]string {
			names, _ := publishedNames(ctx, ns)
			return names
		}).WithTimeout(300*time.Millisecond).Should(BeEmpty(), "the burst is pending")
		stopped := time.Now()
		stop()
		Expect(time.Since(stopped)).To(BeNumerically("<", DefaultShutdownFlushTimeout+time.Second))
		Expect(publishedNames(ctx, ns)).To(Equal(map[string]string{"said_before_stop": ts.String()}))
	})
})
