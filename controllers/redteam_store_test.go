package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Red-team specs of the table store's held copies (af96c9b). They run on
// controller-runtime's fake client, no envtest.

// redteamStore returns a store on c, and the tools of a small (plain)
// table with a ledger record per tool.
func redteamStore(c client.Client) (*configMapTable, []spec.TableTool, []spec.TableRecord) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &configMapTable{client: c, reader: c, namespace: "toolplane-system", name: "tools",
		grace: time.Minute, now: func() time.Time { return now }, gauges: newTableGauges()}
	ts := types.NamespacedName{Namespace: "tenant", Name: "ts"}
	tools := manyTools(ts, "t", 3)
	records := make([]spec.TableRecord, len(tools))
	for i := range records {
		records[i] = spec.TableRecord{Since: now, Why: "Claimed"}
	}
	return s, tools, records
}

// quiet is a context whose logger discards. A plain test whose code logs
// through controller-runtime's root logger 30 s or more after the test
// binary started makes that logger settle on a sink that discards, for
// good: the suite's SetLogger then comes too late, and the specs that
// read the manager's log find nothing.
func quiet() context.Context {
	return ctrl.LoggerInto(context.Background(), logr.Discard())
}

func redteamWrite(ctx context.Context, s *configMapTable, tools []spec.TableTool, records []spec.TableRecord) error {
	ptrs := make([]*spec.TableTool, len(tools))
	for i := range tools {
		ptrs[i] = &tools[i]
	}
	_, err := s.writeTools(ctx, ptrs, records)
	return err
}

// baseHoldsTable reports whether the base ConfigMap, as stored, holds the
// table of tools.
func baseHoldsTable(ctx context.Context, t *testing.T, c client.Client, tools []spec.TableTool) error {
	t.Helper()
	var base corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "toolplane-system", Name: "tools"}, &base); err != nil {
		return err
	}
	got, err := spec.DecodeTableParts(spec.TablePart{Name: base.Name, Data: base.Data, BinaryData: base.BinaryData})
	if err != nil {
		return err
	}
	if want := spec.TableRevision(sorted(tools)); got.Revision != want {
		return errors.New("the base holds revision " + got.Revision + ", want " + want)
	}
	return nil
}

// TestRedteamStoreTrustsAReusedResourceVersion: a base ConfigMap deleted
// and re-created from outside with other content, at the resourceVersion
// the store's held copy has, is never read again: the store takes its held
// copy for what is stored, finds the table there, and writes nothing. The
// fake client gives a re-created object resourceVersion "1" again, as an
// etcd restored from a snapshot without --bump-revision does for the writes
// after the snapshot; the store compared every ConfigMap's content before
// af96c9b. The UID, which the metadata list carries, tells the two apart.
func TestRedteamStoreTrustsAReusedResourceVersion(t *testing.T) {
	for _, global := range []bool{false, true} {
		name := "per-object resourceVersions (reused after a delete)"
		if global {
			name = "global resourceVersion counter (never reused)"
		}
		t.Run(name, func(t *testing.T) {
			ctx := quiet()
			// As the API server does, every object created gets a UID of its
			// own (the fake client sets none).
			b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					obj.SetUID(uuid.NewUUID())
					return c.Create(ctx, obj, opts...)
				},
			})
			if global {
				b = b.WithGlobalResourceVersionCounter()
			}
			c := b.Build()
			s, tools, records := redteamStore(c)
			if err := redteamWrite(ctx, s, tools, records); err != nil {
				t.Fatal(err)
			}
			if err := baseHoldsTable(ctx, t, c, tools); err != nil {
				t.Fatalf("after the first write: %v", err)
			}
			var base corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: "toolplane-system", Name: "tools"}, &base); err != nil {
				t.Fatal(err)
			}
			heldRV := base.ResourceVersion

			// A careless admin deletes the base and creates another in its
			// place.
			if err := c.Delete(ctx, &base); err != nil {
				t.Fatal(err)
			}
			junk := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "toolplane-system", Name: "tools", Labels: map[string]string{TableManagedByLabel: tableManagedBy}},
				Data:       map[string]string{spec.TableKey: `{"schemaVersion":"v1","revision":"sha256:00","tools":[]}`},
			}
			if err := c.Create(ctx, junk); err != nil {
				t.Fatal(err)
			}
			t.Logf("held resourceVersion %q, re-created object's %q", heldRV, junk.ResourceVersion)

			// The publisher's watch kicks a write for the change.
			if err := redteamWrite(ctx, s, tools, records); err != nil {
				t.Fatal(err)
			}
			if err := baseHoldsTable(ctx, t, c, tools); err != nil {
				t.Fatalf("the write after the base was re-created from outside did not repair it: %v", err)
			}
		})
	}
}

// On the real API server (envtest), the held copies are never taken for an
// object that changed: every write, a delete and re-create included, moves
// the resourceVersion, and a Get that returns a newer object than the
// metadata list is what the store compares and updates from.
var _ = Describe("The tool table store's held copies, red-teamed", func() {
	It("repairs a base deleted and re-created from outside, and one edited between the metadata list and the Get", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns, Name: "ts"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		junk := map[string]string{spec.TableKey: `{"schemaVersion":"v1","revision":"sha256:00","tools":[]}`}
		var editOnGet atomic.Bool
		uncached, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		reader := interceptor.NewClient(uncached, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.ConfigMap); ok && key.Name == "tools" && editOnGet.CompareAndSwap(true, false) {
					// An admin edits the base after the list, before the Get.
					var cm corev1.ConfigMap
					Expect(c.Get(ctx, key, &cm)).To(Succeed())
					cm.Data = junk
					Expect(c.Update(ctx, &cm)).To(Succeed())
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		store := &configMapTable{client: k8sClient, reader: reader, namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now }, gauges: newTableGauges()}
		tools := manyTools(ts, "t", 3)
		write := func() {
			GinkgoHelper()
			_, err := store.write(ctx, &spec.Table{Tools: tools})
			Expect(err).NotTo(HaveOccurred())
			got, err := readAsAgent(ctx, ns, GinkgoT().TempDir())
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Revision).To(Equal(spec.TableRevision(sorted(tools))))
		}
		write()

		By("deleting the base and creating another in its place")
		var base corev1.ConfigMap
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &base)).To(Succeed())
		Expect(k8sClient.Delete(ctx, &base)).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools", Labels: map[string]string{TableManagedByLabel: tableManagedBy}},
			Data:       junk,
		})).To(Succeed())
		write()

		By("editing the base between the metadata list and the Get")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &base)).To(Succeed())
		base.Annotations = map[string]string{"touched": "yes"} // moves the resourceVersion: the store Gets it
		Expect(k8sClient.Update(ctx, &base)).To(Succeed())
		editOnGet.Store(true)
		write()
		Expect(editOnGet.Load()).To(BeFalse(), "the store read the base again")

		By("removing the label from the base")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &base)).To(Succeed())
		delete(base.Labels, TableManagedByLabel)
		base.Data = junk
		Expect(k8sClient.Update(ctx, &base)).To(Succeed())
		write()
	})
})
