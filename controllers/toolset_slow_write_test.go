package controllers

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// slowTableWrites makes the API server take at least delay over every
// write of the tool table's ConfigMaps, which then succeeds: a validating
// webhook on loopback that answers late, as a busy API server's writes of
// a large table are. It ends with the spec.
func slowTableWrites(ctx context.Context, delay time.Duration) {
	GinkgoHelper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		if strings.HasPrefix(review.Request.Name, "toolplane-tools") {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	DeferCleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/"
	timeout := int32(2*delay/time.Second + 5)
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "slow-tool-table-writes"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "slow.tables.toolplane.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptrTo(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptrTo(admissionregistrationv1.Ignore),
			TimeoutSeconds:          &timeout,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: tableNamespace}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
		}},
	}
	Expect(k8sClient.Create(ctx, hook)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, hook))).To(Succeed())
	})
	// The API server loads webhooks in the background: wait until a dry
	// run of a table ConfigMap takes the delay.
	Eventually(func() time.Duration {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tableNamespace, Name: "toolplane-tools-probe"}}
		start := time.Now()
		Expect(k8sClient.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		return time.Since(start)
	}).WithTimeout(time.Minute).Should(BeNumerically(">=", delay))
}

var _ = Describe("A ToolSet's status while the table's write is slow", func() {
	It("is written once, Published, when the write that adds its names takes longer than AwaitWrite", func(ctx context.Context) {
		Eventually(func() bool {
			publisher.mu.Lock()
			defer publisher.mu.Unlock()
			return publisher.policiesSet && !publisher.restoring()
		}).Should(BeTrue())
		ns := newNamespace(ctx)
		// Past the hold's first bound, and well within its last.
		slowTableWrites(ctx, DefaultAwaitWrite+3*time.Second)
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		watcher, err := wc.Watch(wctx, &v1alpha1.ToolSetList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer watcher.Stop()

		w := newWorkload(tool("slow_write_a"))
		createReadyPod(ctx, ns, "slow-write-0", map[string]string{"app": "slow-write"}, w.port())
		ts := toolSet(ns, "slow-write")
		createToolSet(ctx, ts)

		// Every status the ToolSet is written with, in order, until one
		// says Published.
		var states []v1alpha1.ToolState
		deadline := time.After(time.Minute)
	watching:
		for {
			select {
			case ev, ok := <-watcher.ResultChan():
				Expect(ok).To(BeTrue(), "the watch ended")
				got, isToolSet := ev.Object.(*v1alpha1.ToolSet)
				if ev.Type != watch.Modified || !isToolSet || len(got.Status.Tools) == 0 {
					continue
				}
				Expect(got.Status.Tools).To(HaveLen(1))
				states = append(states, got.Status.Tools[0].State)
				if got.Status.Tools[0].State == v1alpha1.ToolPublished {
					break watching
				}
			case <-deadline:
				Fail("the ToolSet's tool was not Published within a minute; its states: " + strings.Join(stateNames(states), ", "))
			}
		}
		Expect(states).To(Equal([]v1alpha1.ToolState{v1alpha1.ToolPublished}),
			"one status write, Published: the hold waits for the write under way")
	})
})

func stateNames(states []v1alpha1.ToolState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}
