package controllers

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

var _ = Describe("The table publisher under a stream of changes", func() {
	// Fails against the commit before it: every gap of Debounce between
	// two changes ended a burst, and the table was written about once a
	// change. At bench-scale's 5,000 ToolSets that made the churn's
	// writes, and their bytes, depend on how the changes happened to fall
	// (29 to 58 writes of the whole table in one run of three intervals).
	It("writes the table once a MaxDelay while changes keep coming, and the last change too", func(ctx context.Context) {
		ns := newNamespace(ctx)
		writes := &writeLog{}
		const maxDelay = 500 * time.Millisecond
		// PaceBytes of 1: the table of one tool is paced as a large one.
		rp, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), func(p *TablePublisher) {
			p.Debounce, p.MaxDelay, p.PaceBytes = 10*time.Millisecond, maxDelay, 1
		})
		ts := types.NamespacedName{Namespace: ns + "-a", Name: "a"}
		t0 := time.Now().Add(-time.Hour)
		rp.offer(ctx, ts, t0, entry(ts, "x", "x"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKey("x"))
		before := len(tableOnly(writes.all()))

		start := time.Now()
		const changes = 40
		for i := range changes {
			e := entry(ts, "x", "x")
			e.Description = fmt.Sprintf("Change %d.", i)
			rp.offer(ctx, ts, t0, e)
			time.Sleep(50 * time.Millisecond) // five Debounces between two changes
		}
		Eventually(func(g Gomega) {
			t, _, err := storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(1))
			g.Expect(t.Tools[0].Description).To(Equal(fmt.Sprintf("Change %d.", changes-1)))
		}).Should(Succeed())
		elapsed := time.Since(start)
		n := len(tableOnly(writes.all())) - before
		Expect(n).To(BeNumerically("<=", int(elapsed/maxDelay)+2),
			"%d writes of the table in %v of changes every 50ms: more than one a MaxDelay (%v)", n, elapsed, maxDelay)
		Expect(n).To(BeNumerically(">=", 3), "the table was written while the changes came, not only after")
	})

	It("writes a small table's changes as they come", func(ctx context.Context) {
		ns := newNamespace(ctx)
		writes := &writeLog{}
		rp, _ := startPublisherWith(ns, ns, 0, writes, countingClient(writes), func(p *TablePublisher) {
			p.Debounce, p.MaxDelay = 10*time.Millisecond, 500*time.Millisecond
		})
		ts := types.NamespacedName{Namespace: ns + "-a", Name: "a"}
		t0 := time.Now().Add(-time.Hour)
		rp.offer(ctx, ts, t0, entry(ts, "x", "x"))
		Eventually(publishedNames).WithArguments(ctx, ns).Should(HaveKey("x"))
		before := len(tableOnly(writes.all()))
		const changes = 40
		for i := range changes {
			e := entry(ts, "x", "x")
			e.Description = fmt.Sprintf("Change %d.", i)
			rp.offer(ctx, ts, t0, e)
			time.Sleep(50 * time.Millisecond)
		}
		Eventually(func(g Gomega) {
			t, _, err := storedTable(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools[0].Description).To(Equal(fmt.Sprintf("Change %d.", changes-1)))
		}).Should(Succeed())
		// A table of a few hundred bytes is paced by a few microseconds:
		// about a write a change, were the machine not slower than a
		// write every 50ms.
		Expect(len(tableOnly(writes.all())) - before).To(BeNumerically(">=", changes/4))
	})
})
