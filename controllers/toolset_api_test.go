package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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
		Expect(got.Spec.Protocol).To(Equal(v1alpha1.ProtocolToolkit))
		// The default path depends on the protocol, so the API leaves it
		// out and the operator fills it in.
		Expect(got.Spec.Path).To(BeEmpty())
		Expect(got.Spec.PathOrDefault()).To(Equal("/.well-known/toolplane/tools"))
		Expect(got.Spec.Scheme).To(Equal("http"))
		Expect(got.Spec.Interval.Duration).To(Equal(30 * time.Second))
		Expect(got.Spec.Timeout.Duration).To(Equal(5 * time.Second))
		Expect(got.Spec.Limits.MaxTools).To(BeEquivalentTo(256))
		Expect(got.Spec.Limits.MaxSchemaBytes).To(BeEquivalentTo(65536))
	})

	It("admits a port by number or by IANA name, and a reference by DNS subdomain", func(ctx context.Context) {
		for i, port := range []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(65535), intstr.FromString("http"), intstr.FromString("h2c-alt-15chars"), intstr.FromString("x")} {
			ts := minimalToolSet(ns, fmt.Sprintf("port-%d", i))
			ts.Spec.Port = port
			Expect(k8sClient.Create(ctx, ts)).To(Succeed(), "port %s", port.String())
		}
		ts := minimalToolSet(ns, "secret-ref")
		ts.Spec.Scheme = "https"
		ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "team.tokens-1", Key: "token"}}
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
	})

	It("admits every glob path.Match accepts, escapes and classes included, and selectors of every operator", func(ctx context.Context) {
		ts := minimalToolSet(ns, "globs")
		ts.Spec.Include = []string{"query_*", "[a-z]?_v[0-9]", "[^_]*", `\[literal\]`, "a]b", `[\]\-]x`, "*"}
		ts.Spec.Exclude = []string{"[!x]", "get_[^^]", "?"}
		ts.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
			{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a", "b"}},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "app", Operator: metav1.LabelSelectorOpExists},
		}
		ts.Spec.Scheme = "https"
		ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: "ca.bundle", Key: "ca-bundle_1.crt"}}}
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		// The reconciler takes them as the API server did.
		got := &v1alpha1.ToolSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
		Expect(validatePatterns(&got.Spec)).To(Succeed())
		_, err := metav1.LabelSelectorAsSelector(&got.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
	})

	It("defaults the path of an MCP ToolSet to /mcp, and keeps a path it is given", func(ctx context.Context) {
		ts := minimalToolSet(ns, "mcp-tools")
		ts.Spec.Protocol = v1alpha1.ProtocolMCP
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		got := &v1alpha1.ToolSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
		Expect(got.Spec.Protocol).To(Equal(v1alpha1.ProtocolMCP))
		Expect(got.Spec.PathOrDefault()).To(Equal("/mcp"))

		given := minimalToolSet(ns, "mcp-given")
		given.Spec.Protocol = v1alpha1.ProtocolMCP
		given.Spec.Path = "/v1/mcp"
		Expect(k8sClient.Create(ctx, given)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(given), got)).To(Succeed())
		Expect(got.Spec.PathOrDefault()).To(Equal("/v1/mcp"))
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
		Entry("a protocol other than Toolkit or MCP", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Protocol = "gRPC"
		}, "spec.protocol"),
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
		Entry("port 0", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromInt32(0) }, "port must be a number from 1 to 65535 or an IANA service name"),
		Entry("port 65536", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromInt32(65536) }, "port must be a number from 1 to 65535"),
		Entry("a port name with capitals", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromString("Http") }, "IANA service name"),
		Entry("a port name of 16 letters", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromString("abcdefghijklmnop") }, "IANA service name"),
		Entry("a port name of digits only", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromString("8080") }, "IANA service name"),
		Entry("a port name with two dashes in a row", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromString("my--port") }, "IANA service name"),
		Entry("an empty port name", func(ts *v1alpha1.ToolSet) { ts.Spec.Port = intstr.FromString("") }, "IANA service name"),
		Entry("a Secret name that is not a DNS subdomain", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "Token_Secret", Key: "token"}}
		}, "spec.authorization.bearerToken.name"),
		Entry("a service port out of range", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "crm", Port: 70000}
		}, "spec.service.port"),
		Entry("maxTools below 1", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Limits.MaxTools = -1
		}, "spec.limits.maxTools"),
		Entry("maxSchemaBytes below 256", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Limits.MaxSchemaBytes = 100
		}, "spec.limits.maxSchemaBytes"),
		Entry("a timeout of zero", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Timeout = &metav1.Duration{}
		}, "timeout must be positive"),
		Entry("a CA from neither a Secret nor a ConfigMap", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{}}
		}, "exactly one of secret and configMap must be set"),
		Entry("a CA with insecureSkipVerify", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.TLS = &v1alpha1.TLSConfig{InsecureSkipVerify: true, CA: &v1alpha1.CASource{
				ConfigMap: &v1alpha1.KeyReference{Name: "ca", Key: "ca.crt"},
			}}
		}, "ca and insecureSkipVerify are mutually exclusive"),
		Entry("a bearer token Secret without a key", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "token"}}
		}, "spec.authorization.bearerToken.key"),
		Entry("a prefix longer than 64", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Prefix = strings.Repeat("p", 65)
		}, "spec.prefix"),
		Entry("an include pattern longer than 128", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Include = []string{strings.Repeat("q", 129)}
		}, "spec.include[0]"),
		// A Service name is pasted into every published endpoint: it must be
		// a DNS label, or a tenant could point every agent's calls elsewhere.
		Entry("a service name that names a host, port and fragment", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "evil.example:80/x#", Port: 80}
		}, "spec.service.name"),
		Entry("a service name with a dot", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "a.b", Port: 80}
		}, "spec.service.name"),
		Entry("a service name with userinfo", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "x@evil", Port: 80}
		}, "spec.service.name"),
		Entry("a service name with a path", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "x/..", Port: 80}
		}, "spec.service.name"),
		Entry("an upper-case service name", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "CRM-Tools", Port: 80}
		}, "spec.service.name"),
		Entry("a service name of 64 characters", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: strings.Repeat("a", 64), Port: 80}
		}, "spec.service.name"),
		Entry("a service scheme other than http or https", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Service = &v1alpha1.ServiceReference{Name: "crm", Port: 80, Scheme: "gopher"}
		}, "spec.service.scheme"),
		Entry("a bearer token over http", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "token", Key: "token"}}
		}, "authorization requires scheme https"),
		// The reconciler refuses what path.Match refuses; so does the API
		// server, naming the field and the item.
		Entry("an include pattern with an unclosed class", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Include = []string{"query_*", "query_["}
		}, "spec.include[1]: Invalid value: \"query_[\": include pattern is not a path.Match glob"),
		Entry("an include pattern with an empty class", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Include = []string{"[]"}
		}, "spec.include[0]"),
		Entry("an include pattern with an empty negated class", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Include = []string{"get_[^]"}
		}, "spec.include[0]"),
		Entry("an exclude pattern with a range without an end", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Exclude = []string{"[a-]*"}
		}, "spec.exclude[0]: Invalid value: \"[a-]*\": exclude pattern is not a path.Match glob"),
		Entry("an exclude pattern with a trailing backslash", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Exclude = []string{`debug_\`}
		}, "spec.exclude[0]"),
		Entry("a Secret key with a slash", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.Authorization = &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "token", Key: "../token"}}
		}, "spec.authorization.bearerToken.key"),
		Entry("a CA ConfigMap key with a space", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{ConfigMap: &v1alpha1.KeyReference{Name: "ca", Key: "ca crt"}}}
		}, "spec.tls.ca.configMap.key"),
		Entry("a CA Secret name that is not a DNS subdomain", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Scheme = "https"
			ts.Spec.TLS = &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{Secret: &v1alpha1.KeyReference{Name: "-ca", Key: "ca.crt"}}}
		}, "spec.tls.ca.secret.name"),
		Entry("a selector operator that is not one of the four", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Gt", Values: []string{"1"}}}
		}, "spec.selector: Invalid value: selector operators must be In, NotIn, Exists or DoesNotExist"),
		Entry("a selector In without values", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}
		}, "spec.selector: Invalid value: selector operators In and NotIn need values"),
		Entry("a selector Exists with values", func(ts *v1alpha1.ToolSet) {
			ts.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists, Values: []string{"web"}}}
		}, "spec.selector: Invalid value: selector operators In and NotIn need values"),
		Entry("more than 64 exclude patterns", func(ts *v1alpha1.ToolSet) {
			for i := range 65 {
				ts.Spec.Exclude = append(ts.Spec.Exclude, fmt.Sprintf("x%d", i))
			}
		}, "spec.exclude"),
	)

	It("documents every field for kubectl explain and shows the columns users look for", func() {
		raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "toolplane.io_toolsets.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(yaml.Unmarshal(raw, &crd)).To(Succeed())
		Expect(crd.Spec.Names.ShortNames).To(ContainElement("ts"))
		// Not in "all": `kubectl delete all --all` must not delete ToolSets.
		Expect(crd.Spec.Names.Categories).To(ConsistOf("toolplane"))
		version := crd.Spec.Versions[0]
		var columns []string
		for _, c := range version.AdditionalPrinterColumns {
			columns = append(columns, c.Name)
		}
		Expect(columns).To(ContainElements("Tools", "Conflicts", "Ready", "Age"))

		var undocumented []string
		var walk func(path string, s apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
			for name, prop := range s.Properties {
				if strings.TrimSpace(prop.Description) == "" {
					undocumented = append(undocumented, path+"."+name)
				}
				walk(path+"."+name, prop)
			}
			if s.Items != nil && s.Items.Schema != nil {
				walk(path+"[]", *s.Items.Schema)
			}
		}
		root := version.Schema.OpenAPIV3Schema
		walk("spec", root.Properties["spec"])
		walk("status", root.Properties["status"])
		Expect(undocumented).To(BeEmpty())
	})
})
