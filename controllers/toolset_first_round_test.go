package controllers

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var _ = Describe("A new ToolSet's first round", func() {
	It("holds no worker while its Pods answer, and asks the API server for a Service the cache lacks beside the scrapes", func(ctx context.Context) {
		ns := newNamespace(ctx)
		release := make(chan struct{})
		w := newHandWrittenWorkload(tool("first_a"))
		w.setHandler(func(rw http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(rw, "slow", http.StatusServiceUnavailable)
		})
		DeferCleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		createReadyPod(ctx, ns, "first-0", map[string]string{"app": "first"}, w.port())
		ts := toolSet(ns, "first")
		// Long enough that the manager's own reconciler, scraping the same
		// Pod, writes no status before this spec's first reconcile.
		ts.Spec.Interval = &metav1.Duration{Duration: time.Minute}
		ts.Spec.Timeout = &metav1.Duration{Duration: 20 * time.Second}
		createToolSet(ctx, ts)

		var serviceGets atomic.Int32
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		counting := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Service); ok {
					serviceGets.Add(1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		// A scrape wait far longer than the ToolSet's timeout: a reconcile
		// that waited would return only once the round had ended.
		r := &ToolSetReconciler{Client: direct, APIReader: counting, Recorder: &events.FakeRecorder{}, Publisher: publisher,
			Ceilings: testCeilings, ScrapeWait: time.Hour}
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ts)}
		inFlight := func() bool {
			r.runs.mu.Lock()
			defer r.runs.mu.Unlock()
			run := r.runs.runs[req.NamespacedName]
			return run != nil && !run.finished
		}

		res, err := r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		Expect(inFlight()).To(BeTrue(), "the reconcile handed its worker back with the round still scraping")
		Eventually(w.hits.Load).Should(BeNumerically(">=", 1))
		Eventually(serviceGets.Load).Should(BeEquivalentTo(1), "the round, not the reconcile, asks the API server for the Service the cache lacks")

		close(release)
		Eventually(r.runs.wake).Should(Receive(), "the round enqueues the ToolSet when it ends")
		_, err = r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(inFlight()).To(BeFalse())
		// The API server said the Service is missing: later rounds trust the
		// cache.
		Expect(r.memoryOf(req.NamespacedName, getToolSet(ctx, Default, ts).UID).serviceMissing).To(Equal(ts.Spec.Service.Name))
	})
})
