package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/toolkit/spec"
)

var _ = Describe("The tool table store's clean-up", func() {
	// A stream of changes leaves each part old chunks whose graces end one
	// after another (bench-scale's churn at 5,000 ToolSets: some 35 writes
	// of the table within a grace, each leaving most parts a chunk).
	// Removed as each grace ended, they took a write of the part each: 105
	// writes of 22 MB after that churn. With the publisher's collectDelay,
	// a part waits until its oldest is that much past its grace and then
	// drops every chunk past its own. Against the commit before it, the
	// delayed store writes the part once a chunk, as the prompt one does.
	It("writes a part to drop old chunks once for several graces, never one before its grace has passed", func(ctx context.Context) {
		const grace, apart, chunks = time.Minute, 4 * time.Second, 10
		cleanup := func(delay time.Duration) (writes int) {
			ns := newNamespace(ctx)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			store := &configMapTable{
				client: k8sClient, reader: k8sClient, namespace: ns, name: "tools",
				grace: grace, collectDelay: delay, unnamed: map[string]time.Time{},
			}
			// A part of ten chunks no index names any more, unnamed four
			// seconds apart.
			part := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools-1", Labels: map[string]string{TableManagedByLabel: tableManagedBy}},
				BinaryData: map[string][]byte{},
			}
			unnamed := map[string]time.Time{}
			for i := range chunks {
				sum := sha256.Sum256(fmt.Appendf(nil, "chunk %d", i))
				key := spec.TableChunkKey(hex.EncodeToString(sum[:]))
				part.BinaryData[key] = sum[:]
				unnamed[key] = t0.Add(time.Duration(i) * apart)
				store.unnamed[part.Name+"/"+key] = unnamed[key]
			}
			Expect(k8sClient.Create(ctx, part)).To(Succeed())
			stored := map[string]*corev1.ConfigMap{part.Name: part}
			now := t0
			for range 2 * chunks {
				before := stored[part.Name]
				wrote, next, err := store.collect(ctx, stored, map[string]bool{}, now)
				Expect(err).NotTo(HaveOccurred())
				writes += wrote
				if after := stored[part.Name]; wrote > 0 && after != nil {
					for key, at := range unnamed {
						_, had := before.BinaryData[key]
						_, has := after.BinaryData[key]
						Expect(had && !has && now.Sub(at) < grace).To(BeFalse(), "a chunk %v into its grace was removed", now.Sub(at))
					}
				}
				if next == 0 {
					break
				}
				now = now.Add(next)
			}
			Expect(stored).NotTo(HaveKey(part.Name), "the emptied part is deleted in the end")
			return writes
		}
		prompt, delayed := cleanup(0), cleanup(grace/2)
		GinkgoWriter.Printf("clean-up writes of one part: %d removed as each grace ends, %d with a delay of half a grace\n", prompt, delayed)
		Expect(prompt).To(Equal(chunks), "one write a chunk, the last a delete")
		// Due 90s after the first: the eight past their grace go; the last
		// two go at the second's 90s.
		Expect(delayed).To(Equal(2))
	})
})
