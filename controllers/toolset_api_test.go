package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

func minimalToolSet(ns, name string) *v1alpha1.ToolSet {
	return &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Port:     intstr.FromString("http"),
		},
	}
}

var _ = Describe("The ToolSet API", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("is installed, applies its defaults and reads back", func(ctx context.Context) {
		ts := minimalToolSet(ns, "crm-tools")
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())

		got := &v1alpha1.ToolSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
		Expect(got.Spec.Selector.MatchLabels).To(HaveKeyWithValue("app", "crm-tools"))
		Expect(got.Spec.Port).To(Equal(intstr.FromString("http")))
		Expect(got.Spec.Path).To(Equal("/.well-known/toolplane/tools"))
		Expect(got.Spec.Scheme).To(Equal("http"))
		Expect(got.Spec.Interval.Duration).To(Equal(30 * time.Second))
		Expect(got.Spec.Timeout.Duration).To(Equal(5 * time.Second))
		Expect(got.Spec.Limits.MaxTools).To(BeEquivalentTo(256))
		Expect(got.Spec.Limits.MaxSchemaBytes).To(BeEquivalentTo(65536))
	})

	DescribeTable("rejects an invalid ToolSet",
		func(ctx context.Context, mutate func(*v1alpha1.ToolSet), message string) {
			ts := minimalToolSet(ns, "bad")
			mutate(ts)
			err := k8sClient.Create(ctx, ts)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("timeout above interval (CEL)", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Interval = &metav1.Duration{Duration: 10 * time.Second}
			ts.Spec.Timeout = &metav1.Duration{Duration: 20 * time.Second}
		}, "timeout must not exceed interval"),
		Entry("timeout above the default interval (CEL after defaulting)", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
		}, "timeout must not exceed interval"),
		Entry("interval below 5s", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Interval = &metav1.Duration{Duration: time.Second}
			ts.Spec.Timeout = &metav1.Duration{Duration: time.Second}
		}, "interval must be at least 5s"),
		Entry("a scheme other than http or https", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "ftp"
		}, "spec.scheme"),
		Entry("a path that is not absolute", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Path = "tools"
		}, "spec.path"),
		Entry("a prefix with a space", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Prefix = "crm tools"
		}, "spec.prefix"),
		Entry("tls with scheme http", func(ts *v1alpha1.ToolSet) {
			ts.Spec.TLS = &v1alpha1.TLSConfig{InsecureSkipVerify: true}
		}, "tls requires scheme https"),
		Entry("a CA from both a Secret and a ConfigMap", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{
				Secret:    &v1alpha1.KeyReference{Name: "ca", Key: "ca.crt"},
				ConfigMap: &v1alpha1.KeyReference{Name: "ca", Key: "ca.crt"},
			}}
		}, "exactly one of secret and configMap must be set"),
		Entry("a service port out of range", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "crm", Port: 70000}
		}, "spec.service.port"),
		Entry("maxTools below 1", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Limits.MaxTools = -1
		}, "spec.limits.maxTools"),
	)
})
