package controllers

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

var _ = Describe("A ToolSet that names a missing Secret", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	// slowToolSet scrapes every 10 minutes: within a spec's waits, only the
	// retry of a missing reference (every 5s here) brings another round.
	slowToolSet := func(name string) *v1alpha1.ToolSet {
		ts := toolSet(ns, name)
		ts.Spec.Interval = &metav1.Duration{Duration: 10 * time.Minute}
		ts.Spec.Scheme = "https"
		ts.Spec.TLS = &v1alpha1.TLSConfig{InsecureSkipVerify: true}
		return ts
	}
	// everyConditionCurrent checks what kstatus reads first: every
	// condition describes the generation stored.
	everyConditionCurrent := func(g Gomega, got *v1alpha1.ToolSet) {
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		for _, c := range got.Status.Conditions {
			g.Expect(c.ObservedGeneration).To(Equal(got.Generation), "condition %s", c.Type)
		}
	}

	It("says SecretNotFound, then SecretKeyNotFound, reads as Reconciling, and publishes within seconds of the key appearing, whatever its interval", func(ctx context.Context) {
		const token = "tok-5d0c7a1e-never-show-me"
		w := newTLSWorkload(tool("vault_read"))
		w.requireToken(token)
		createReadyPod(ctx, ns, "vault-0", map[string]string{"app": "vault"}, w.port())
		ts := slowToolSet("vault")
		ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "vault-token", Key: "token"}}
		createToolSet(ctx, ts)

		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			ready := readyCondition(got)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSecretNotFound))
			g.Expect(ready.Message).To(Equal("reading spec.authorization.bearerToken: Secret vault-token not found"))
			// Someone else (a sibling in the same apply, a secrets
			// operator) creates the Secret: the ToolSet is in progress,
			// not stuck on its spec.
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReconciling)).To(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonSecretNotFound)))
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, v1alpha1.ConditionStalled)).To(BeTrue())
			everyConditionCurrent(g, got)
		}).Should(Succeed())
		Expect(w.hits.Load()).To(BeZero(), "no scrape without the token")

		// The Secret appears without the key: a reason of its own, at once.
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-token"},
			Data:       map[string][]byte{"other": []byte(token)},
		}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			ready := readyCondition(got)
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSecretKeyNotFound))
			g.Expect(ready.Message).To(Equal(`reading spec.authorization.bearerToken: Secret vault-token has no key "token"`))
			everyConditionCurrent(g, got)
		}).WithTimeout(15 * time.Second).Should(Succeed())

		// The key appears: published well within the 10-minute interval.
		secret.Data["token"] = []byte(token)
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Reason).To(Equal(v1alpha1.ReasonPublished))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("vault_read", v1alpha1.ToolPublished)))
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue())
			everyConditionCurrent(g, got)
		}).WithTimeout(15 * time.Second).Should(Succeed())
		Expect(w.authHeaders()).To(ContainElement("Bearer " + token))

		// The Secret's value appears nowhere: not in status, not in events.
		raw, err := json.Marshal(getToolSet(ctx, Default, ts))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(token))
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(ctx, g, ts)).To(ContainElements(v1alpha1.ReasonSecretNotFound, v1alpha1.ReasonSecretKeyNotFound, eventScrapeRecovered))
		}).Should(Succeed())
		for _, e := range eventsFor(ctx, Default, ts) {
			Expect(e.Note).NotTo(ContainSubstring(token))
		}
	})

	It("publishes within seconds of its CA Secret appearing, whatever its interval", func(ctx context.Context) {
		w := newTLSWorkload(tool("ca_tool"))
		createReadyPod(ctx, ns, "ca-0", map[string]string{"app": "ca"}, w.port())
		ts := slowToolSet("ca")
		ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{Secret: &v1alpha1.KeyReference{Name: "ca", Key: "ca.crt"}}}
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			ready := readyCondition(getToolSet(ctx, g, ts))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSecretNotFound))
			g.Expect(ready.Message).To(Equal("reading spec.tls.ca: Secret ca not found"))
		}).Should(Succeed())

		// httptest's certificate is for 127.0.0.1 and example.com.
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
			Data:       map[string][]byte{"ca.crt": certPEM},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Reason).To(Equal(v1alpha1.ReasonPublished))
			g.Expect(got.Status.Tools).To(ConsistOf(toolNamed("ca_tool", v1alpha1.ToolPublished)))
		}).WithTimeout(15 * time.Second).Should(Succeed())
	})

	It("says ConfigMapKeyNotFound for a CA ConfigMap without the key", func(ctx context.Context) {
		createReadyPod(ctx, ns, "cm-0", map[string]string{"app": "cm"}, newTLSWorkload(tool("cm_tool")).port())
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"},
			Data:       map[string]string{"other.crt": "x"},
		})).To(Succeed())
		ts := slowToolSet("cm")
		ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: "bundle", Key: "ca.crt"}}}
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			ready := readyCondition(got)
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonConfigMapKeyNotFound))
			g.Expect(ready.Message).To(Equal(`reading spec.tls.ca: ConfigMap bundle has no key "ca.crt"`))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReconciling)).To(HaveField("Reason", v1alpha1.ReasonConfigMapKeyNotFound))
			everyConditionCurrent(g, got)
		}).Should(Succeed())
	})

	It("still reads an empty token as InvalidSpec: the value, not its absence, must change", func(ctx context.Context) {
		createReadyPod(ctx, ns, "empty-0", map[string]string{"app": "empty"}, newTLSWorkload(tool("empty_tool")).port())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "empty"},
			Data:       map[string][]byte{"token": []byte(" \n")},
		})).To(Succeed())
		ts := slowToolSet("empty")
		ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "empty", Key: "token"}}
		createToolSet(ctx, ts)
		Eventually(func(g Gomega) {
			got := getToolSet(ctx, g, ts)
			g.Expect(readyCondition(got).Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)).To(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonInvalidSpec)))
		}).Should(Succeed())
	})

	It("looks for the Secret again every 5s whatever its interval, at no status write while nothing changes", func(ctx context.Context) {
		ts := slowToolSet("retry")
		ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "later", Key: "token"}}
		createToolSet(ctx, ts)
		// The suite's manager reconciles it too; wait until it has said so,
		// so that what is counted below is this reconciler's alone.
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(getToolSet(ctx, g, ts)).Reason).To(Equal(v1alpha1.ReasonSecretNotFound))
		}).Should(Succeed())

		var secretGets, patches atomic.Int32
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		counting := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Secret); ok {
					secretGets.Add(1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				patches.Add(1)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		})
		// The manager's ceilings, so that Clamped says what it says.
		r := &ToolSetReconciler{Client: counting, APIReader: counting, Recorder: &events.FakeRecorder{}, Publisher: publisher, Ceilings: testCeilings}
		for range 3 {
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ts)})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.RequeueAfter).To(BeNumerically(">", 0))
			Expect(res.RequeueAfter).To(BeNumerically("<=", DefaultMinInterval), "not the 10-minute interval")
		}
		Expect(secretGets.Load()).To(BeEquivalentTo(3), "one read of the Secret a round, by name")
		Expect(patches.Load()).To(BeZero(), "the status the manager wrote already says it all")
	})
})
