package install

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
)

var _ = Describe("An install limited by watchNamespaces", func() {
	It("publishes the ToolSets of its namespaces, ignores one outside them, and may read nothing there", func(ctx context.Context) {
		const release, operatorNS, watchedNS, otherNS = "scoped", "scoped-system", "scoped-watched", "scoped-other"
		m := helmTemplate(release, operatorNS, "--set", "watchNamespaces={"+watchedNS+"}", "--set", "leaderElection.enabled=false")
		for _, crb := range m.ofKind("ClusterRoleBinding") {
			Expect(crb.GetName()).NotTo(Equal(release+"-toolplane-manager"), "a scoped install binds its ClusterRole cluster-wide")
		}
		var objects manifests
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			objects = append(objects, m.ofKind(kind)...)
		}
		ensureNamespaces(ctx, operatorNS, watchedNS, otherNS)
		Expect(apply(ctx, objects, "", false)).To(Succeed())

		By("checking the RBAC with the API server's authorizer")
		sa := m.ofKind("ServiceAccount").manager()[0]
		can := func(ctx context.Context, verb, resource, namespace string) bool {
			GinkgoHelper()
			group := ""
			if resource == "toolsets" {
				group = "toolplane.io"
			}
			review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               fmt.Sprintf("system:serviceaccount:%s:%s", sa.GetNamespace(), sa.GetName()),
				Groups:             []string{"system:serviceaccounts", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
			}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return review.Status.Allowed
		}
		Eventually(func(ctx context.Context) bool {
			return can(ctx, "list", "pods", watchedNS) && can(ctx, "watch", "toolsets", watchedNS) && can(ctx, "get", "secrets", watchedNS) &&
				can(ctx, "watch", "services", watchedNS)
		}).WithContext(ctx).WithTimeout(eventuallyTimeout).Should(BeTrue())
		for _, denied := range []struct{ verb, resource, namespace string }{
			{"list", "pods", otherNS}, {"list", "pods", ""}, {"watch", "toolsets", otherNS}, {"list", "services", otherNS}, {"watch", "services", ""},
			{"list", "toolsets", ""}, {"get", "secrets", otherNS}, {"get", "configmaps", otherNS},
		} {
			Expect(can(ctx, denied.verb, denied.resource, denied.namespace)).To(BeFalse(), "%+v allowed", denied)
		}

		By("serving tools in both namespaces")
		scheme := runtime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		for _, ns := range []string{watchedNS, otherNS} {
			srv := httptest.NewServer(harness.NewWorkload(ns, harness.Tools(ns+"_tool_", 2)))
			DeferCleanup(srv.Close)
			u, err := url.Parse(srv.URL)
			Expect(err).NotTo(HaveOccurred())
			port, err := strconv.Atoi(u.Port())
			Expect(err).NotTo(HaveOccurred())
			_, err = harness.CreateReadyPod(ctx, c, ns, "tools-0", "tools", port)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Create(ctx, harness.NewToolSet(ns, "tools", "tools", "/", 5*time.Second))).To(Succeed())
		}

		By("running the manager with the chart's arguments, as the chart's ServiceAccount")
		runChartManager(ctx, m)

		Eventually(func(g Gomega, ctx context.Context) {
			table, _, err := harness.ReadTable(ctx, c, operatorNS, "toolplane-tools")
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, t := range table.Tools {
				names = append(names, t.Name)
			}
			g.Expect(names).To(ConsistOf(watchedNS+"_tool_00", watchedNS+"_tool_01"))
		}).WithContext(ctx).WithTimeout(2 * eventuallyTimeout).Should(Succeed())

		By("leaving the ToolSet outside its namespaces untouched")
		Consistently(func(g Gomega, ctx context.Context) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: "tools"}, ts)).To(Succeed())
			g.Expect(ts.Status.Conditions).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		ts := &v1alpha1.ToolSet{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: watchedNS, Name: "tools"}, ts)).To(Succeed())
		Expect(ts.Status.Conditions).NotTo(BeEmpty(), "the watched ToolSet has no status")
	})
})
