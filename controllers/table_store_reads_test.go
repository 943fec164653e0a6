package controllers

import (
	"context"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// readLog records the ConfigMaps a reader read whole, by name ("*" for a
// list of every ConfigMap), and its lists of their metadata alone.
type readLog struct {
	mu    sync.Mutex
	whole []string
	metas int
}

func (l *readLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.whole, l.metas = nil, 0
}

func (l *readLog) read() (whole []string, metas int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.whole), l.metas
}

// readingClient is k8sClient, uncached, recording its reads of ConfigMaps
// in log.
func readingClient(log *readLog) client.Reader {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				log.mu.Lock()
				log.whole = append(log.whole, key.Name)
				log.mu.Unlock()
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			log.mu.Lock()
			switch l := list.(type) {
			case *corev1.ConfigMapList:
				log.whole = append(log.whole, "*")
			case *metav1.PartialObjectMetadataList:
				if l.GroupVersionKind().Kind == "ConfigMapList" {
					log.metas++
				}
			}
			log.mu.Unlock()
			return c.List(ctx, list, opts...)
		},
	})
}

var _ = Describe("The tool table store, reading back what is stored", func() {
	It("reads again only the ConfigMaps whose resourceVersion moved: none after its own writes, one edited from outside, none deleted", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns, Name: "big"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		reads := &readLog{}
		store := &configMapTable{
			client: k8sClient, reader: readingClient(reads), namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now },
		}
		// A write may leave old chunks for after their grace: the wait it
		// asks for is the clock's to pass.
		write := func(tools []spec.TableTool) {
			GinkgoHelper()
			_, err := store.write(ctx, &spec.Table{Tools: tools})
			Expect(err).NotTo(HaveOccurred())
		}
		readsAs := func(tools []spec.TableTool) {
			GinkgoHelper()
			got, err := readAsAgent(ctx, ns, GinkgoT().TempDir())
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Revision).To(Equal(spec.TableRevision(sorted(tools))))
		}

		// 2,500 of these tools take the base and at least one part.
		tools := noisyTools(ts, "t", 2500)
		write(tools)
		readsAs(tools)
		cms, err := tableConfigMaps(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(cms)).To(BeNumerically(">=", 2), "the table is split")

		By("writing a change: every ConfigMap stored is one the store wrote")
		reads.reset()
		tools = slices.Clone(tools)
		tools[len(tools)/2].Description += " Also archived ones."
		write(tools)
		readsAs(tools)
		whole, metas := reads.read()
		Expect(whole).To(BeEmpty(), "no ConfigMap read whole")
		Expect(metas).To(Equal(1))

		By("writing after a part was emptied from outside")
		now = now.Add(2 * time.Minute) // past the grace: one settled write
		write(tools)
		cms, err = tableConfigMaps(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		var part *corev1.ConfigMap
		for i := range cms {
			if cms[i].Name != "tools" {
				part = &cms[i]
			}
		}
		Expect(part).NotTo(BeNil())
		part.BinaryData = nil
		Expect(k8sClient.Update(ctx, part)).To(Succeed())
		reads.reset()
		write(tools)
		readsAs(tools)
		whole, _ = reads.read()
		Expect(whole).To(Equal([]string{part.Name}), "only the part edited from outside is read whole")

		By("writing after that part was deleted from outside")
		Expect(k8sClient.Delete(ctx, part)).To(Succeed())
		reads.reset()
		write(tools)
		readsAs(tools)
		whole, _ = reads.read()
		Expect(whole).To(BeEmpty(), "a ConfigMap deleted is not read")
	})
})
