package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var _ = Describe("The paced publisher while the API server fails its writes", func() {
	// A failed write keeps burstStart; every later kick resets the timer to
	// burstStart+MaxDelay-now, long past, so a tenant changing its tools
	// every 50ms makes the publisher retry the table at once on each
	// change: neither the backoff nor the pace holds.
	It("retries a failed write of a paced table no more than once a MaxDelay under a stream of changes", func(ctx context.Context) {
		ns := newNamespace(ctx)
		writes := &writeLog{}
		var failing atomic.Bool
		var attempts atomic.Int32
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		fail := func(obj client.Object) error {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "tools" && failing.Load() {
				attempts.Add(1)
				return apierrors.NewServiceUnavailable("the API server is overloaded")
			}
			return nil
		}
		fc := interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := fail(obj); err != nil {
					return err
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := fail(obj); err != nil {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
		})
		const maxDelay = 500 * time.Millisecond
		rp, _ := startPublisherWith(ns, ns, 0, writes, fc, func(p *TablePublisher) {
			p.Debounce, p.MaxDelay, p.PaceBytes = 10*time.Millisecond, maxDelay, 1
		})
		ts := types.NamespacedName{Namespace: ns + "-a", Name: "a"}
		t0 := time.Now().Add(-time.Hour)
		rp.offer(ctx, ts, t0, entry(ts, "x", "x"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKey("x"))

		failing.Store(true)
		start := time.Now()
		for i := range 40 {
			e := entry(ts, "x", "x")
			e.Description = fmt.Sprintf("Change %d.", i)
			rp.offer(ctx, ts, t0, e)
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := time.Since(start)
		n := int(attempts.Load())
		GinkgoWriter.Printf("%d attempts to write the table in %v while writes fail\n", n, elapsed)
		Expect(n).To(BeNumerically("<=", int(elapsed/maxDelay)+2),
			"%d attempts to write a paced table in %v of changes every 50ms while the API server fails them: more than one a MaxDelay (%v), and no backoff", n, elapsed, maxDelay)
	})
})
