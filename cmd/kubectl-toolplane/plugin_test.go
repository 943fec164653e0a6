package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

// toolList is what `tools -o json` prints: a kubectl List of Tool objects.
type toolList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       spec.TableTool    `json:"spec"`
		Status     struct {
			State string `json:"state"`
		} `json:"status"`
	} `json:"items"`
}

func schemaTool(name, schema string) spec.Tool {
	return spec.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: json.RawMessage(schema)}
}

const (
	querySchema  = `{"type":"object","properties":{"q":{"type":"string"}}}`
	refundSchema = `{"type":"object","properties":{"id":{"type":"string"},"reason":{"type":"string","enum":["damaged","late","other"]}},"required":["id"]}`
)

// writeDoc writes a spec document of tools to a file, as a build would.
func writeDoc(tools ...spec.Tool) string {
	GinkgoHelper()
	spec.SortTools(tools)
	doc := spec.Document{SchemaVersion: spec.SchemaVersion, Revision: spec.Revision(tools), Server: spec.Server{Name: "build"}, Tools: tools}
	path := filepath.Join(GinkgoT().TempDir(), "tools.json")
	Expect(os.WriteFile(path, must(json.Marshal(doc)), 0o600)).To(Succeed())
	return path
}

// The cluster of these specs: crm/crm-tools (a toolkit server) owns
// lint_query and lint_refund; crm/crm-broken serves one valid tool and one
// Invalid one; shop/shop-tools also serves lint_refund, Conflicted.
var _ = Describe("kubectl toolplane", Ordered, func() {
	var crm *httptest.Server

	BeforeAll(func(ctx context.Context) {
		crm = newToolkitServer(schemaTool("lint_query", querySchema), schemaTool("lint_refund", refundSchema))
		crmTS := serveToolSet(ctx, "crm", "crm-tools", crm)
		Eventually(func(g Gomega) {
			got := &v1alpha1.ToolSet{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crmTS), got)).To(Succeed())
			g.Expect(got.Status.PublishedTools).To(BeEquivalentTo(2))
		}).Should(Succeed())

		broken := newDocServer(schemaTool("lint_fine", querySchema), schemaTool("lint_bad_schema", `{"type":"string"}`))
		serveToolSet(ctx, "crm", "crm-broken", broken.srv)
		shop := newDocServer(schemaTool("lint_refund", `{"type":"object","properties":{"order":{"type":"string"}}}`))
		shopTS := serveToolSet(ctx, "shop", "shop-tools", shop.srv)
		Eventually(func(g Gomega) {
			got := &v1alpha1.ToolSet{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(shopTS), got)).To(Succeed())
			g.Expect(got.Status.ConflictedTools).To(BeEquivalentTo(1))
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "crm", Name: "crm-broken"}, got)).To(Succeed())
			g.Expect(got.Status.Tools).To(HaveLen(2))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			out, _, code := run("tools", "-A", "-o", "json")
			g.Expect(code).To(Equal(0))
			var list toolList
			g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
			n := 0
			for _, it := range list.Items {
				if it.Metadata.Namespace == "crm" {
					n++
				}
			}
			g.Expect(n).To(Equal(3))
		}).Should(Succeed())
	})

	It("tools lists a namespace's tools as kubectl would: name, owner, state, endpoint, age", func() {
		out, _, code := run("tools", "-n", "crm")
		Expect(code).To(Equal(0))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(4))
		Expect(lines[0]).To(MatchRegexp(`^NAME\s+OWNER\s+STATE\s+ENDPOINT\s+AGE$`))
		Expect(lines[1]).To(MatchRegexp(`^lint_fine\s+crm-broken\s+Published\s+http://crm-broken\.crm\.svc\.cluster\.local:8080/tools/lint_fine\s+\d+s$`))
		Expect(lines[2]).To(MatchRegexp(`^lint_query\s+crm-tools\s+Published\s+http://crm-tools\.crm\.svc\.cluster\.local:8080/tools/lint_query\s+\d+s$`))
		Expect(lines[3]).To(MatchRegexp(`^lint_refund\s+crm-tools\s+Published\s+`))

		out, errOut, code := run("tools", "-n", "shop")
		Expect(code).To(Equal(0))
		Expect(out).To(BeEmpty())
		Expect(errOut).To(Equal("No tools found in shop namespace.\n"))

		out, _, _ = run("tools", "-A", "-o", "wide")
		Expect(out).To(MatchRegexp(`(?m)^NAMESPACE\s+NAME\s+OWNER\s+STATE\s+ENDPOINT\s+AGE\s+SOURCE NAME\s+SCHEMA DIGEST\s+MCP$`))
		Expect(out).To(MatchRegexp(`(?m)^crm\s+lint_query\s+crm-tools\s+Published\s+\S+\s+\S+\s+lint_query\s+sha256:[0-9a-f]{12}\s+http://crm-tools\.crm\.svc\.cluster\.local:8080/mcp$`))
	})

	It("tools prints with kubectl's printers: name, jsonpath, go-template, custom-columns, --no-headers, json", func() {
		out, _, code := run("tools", "-n", "crm", "-o", "name")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("tool.toolplane.io/lint_fine\ntool.toolplane.io/lint_query\ntool.toolplane.io/lint_refund\n"))

		out, _, _ = run("tools", "-n", "crm", "-o", "jsonpath={.items[*].metadata.name}")
		Expect(out).To(Equal("lint_fine lint_query lint_refund"))
		out, _, _ = run("tools", "-n", "crm", "-o", `jsonpath={range .items[*]}{.spec.toolSet.name}{"\t"}{.status.state}{"\n"}{end}`)
		Expect(out).To(Equal("crm-broken\tPublished\ncrm-tools\tPublished\ncrm-tools\tPublished\n"))
		out, _, _ = run("tools", "-n", "crm", "-o", `go-template={{range .items}}{{.metadata.name}}={{.spec.endpoints.invoke}}{{"\n"}}{{end}}`)
		Expect(out).To(ContainSubstring("lint_query=http://crm-tools.crm.svc.cluster.local:8080/tools/lint_query\n"))
		out, _, _ = run("tools", "-n", "crm", "--template", "{{len .items}}")
		Expect(out).To(Equal("3"))

		out, _, _ = run("tools", "-A", "--no-headers")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).NotTo(ContainElement(MatchRegexp(`^NAMESPACE`)))
		Expect(lines[0]).To(MatchRegexp(`^crm\s+lint_fine\s+crm-broken\s+Published\s+http://crm-broken\.crm\.svc\.cluster\.local:8080/tools/lint_fine\s+\d+s$`))

		out, _, _ = run("tools", "-n", "crm", "-o", "custom-columns=TOOL:.metadata.name,SOURCE:spec.sourceName,HINT:.spec.annotations.readOnlyHint")
		lines = strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(4))
		Expect(lines[0]).To(MatchRegexp(`^TOOL\s+SOURCE\s+HINT$`))
		Expect(lines[2]).To(MatchRegexp(`^lint_query\s+lint_query\s+<none>$`))
		out, _, _ = run("tools", "-n", "crm", "-o", "custom-columns=TOOL:.metadata.name", "--no-headers")
		Expect(out).To(Equal("lint_fine\nlint_query\nlint_refund\n"))

		out, _, _ = run("tools", "-n", "crm", "-o", "json")
		var list toolList
		Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
		Expect(list.Kind).To(Equal("List"))
		Expect(list.Items).To(HaveLen(3))
		Expect(list.Items[1].Kind).To(Equal("Tool"))
		Expect(list.Items[1].APIVersion).To(Equal("toolplane.io/v1alpha1"))
		Expect(list.Items[1].Metadata.Namespace).To(Equal("crm"))
		Expect(list.Items[1].Spec.Name).To(Equal("lint_query"))
		Expect(list.Items[1].Spec.SchemaDigest).To(HavePrefix("sha256:"))
		Expect(list.Items[1].Status.State).To(Equal("Published"))

		out, errOut, _ := run("tools", "-n", "shop", "-o", "json")
		Expect(errOut).To(BeEmpty())
		Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
		Expect(list.Items).To(BeEmpty())

		_, errOut, code = run("tools", "-o", "table")
		Expect(code).To(Equal(1))
		Expect(errOut).To(HavePrefix(`error: unable to match a printer suitable for the output format "table"`))
	})

	It("tools --conflicts lists each contested name with every claimant, the owner first", func() {
		out, _, code := run("tools", "-A", "--conflicts")
		Expect(code).To(Equal(0))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(3))
		Expect(lines[0]).To(MatchRegexp(`^NAME\s+CLAIMANT\s+STATE\s+DETAIL$`))
		Expect(lines[1]).To(MatchRegexp(`^lint_refund\s+crm/crm-tools\s+Published\s+owns the name$`))
		Expect(lines[2]).To(MatchRegexp(`^lint_refund\s+shop/shop-tools\s+Conflicted\s+the name is owned by ToolSet crm/crm-tools$`))

		// From the losing side's namespace, the same name and claimants.
		out2, _, _ := run("tools", "-n", "shop", "--conflicts")
		Expect(out2).To(Equal(out))
		_, errOut, _ := run("tools", "-n", "default", "--conflicts")
		Expect(errOut).To(Equal("No contested tool names in namespace default.\n"))
	})

	It("describe tool shows the owner, the claimants and their states, endpoints and schemas", func() {
		out, _, code := run("describe", "tool", "lint_refund")
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?m)^Name:\s+lint_refund$`))
		Expect(out).To(MatchRegexp(`(?m)^Owner:\s+ToolSet crm/crm-tools$`))
		Expect(out).To(MatchRegexp(`(?m)^State:\s+Published$`))
		Expect(out).To(MatchRegexp(`(?m)^Schema Digest:\s+sha256:[0-9a-f]{64}$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+Invoke:\s+http://crm-tools\.crm\.svc\.cluster\.local:8080/tools/lint_refund$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+crm/crm-tools\s+Published\s+-$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+shop/shop-tools\s+Conflicted\s+the name is owned by ToolSet crm/crm-tools$`))
		Expect(out).To(ContainSubstring(`"enum": [`))
		Expect(out).To(MatchRegexp(`(?m)^Last Breaking Change:\n\s+<none>$`))

		out, _, code = run("describe", "tool", "lint_bad_schema")
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?m)^State:\s+Not published$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+crm/crm-broken\s+Invalid\s+inputSchema must be a JSON Schema with "type": "object"$`))

		_, errOut, code := run("describe", "tool", "lint_nobody")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring(`tool "lint_nobody" not found`))
	})

	It("describe takes the tool as kubectl takes a resource: tool NAME, tools NAME, tool/NAME, and -o name's form", func() {
		want, _, code := run("describe", "tool", "lint_query")
		Expect(code).To(Equal(0))
		Expect(want).To(MatchRegexp(`(?m)^Name:\s+lint_query$`))
		for _, args := range [][]string{{"tools", "lint_query"}, {"tool/lint_query"}, {"tools/lint_query"}, {"tool.toolplane.io/lint_query"}} {
			out, errOut, code := run(append([]string{"describe"}, args...)...)
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(Equal(want), "describe %v", args)
		}
		out, _, code := run("describe", "tool/lint_query", "tool/lint_refund")
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?s)^Name:\s+lint_query\n.*\n\nName:\s+lint_refund\n`))

		_, errOut, code := run("describe", "pod/lint_query")
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: the type \"pod\" is not tool: kubectl toolplane describes tools only\n"))
		_, errOut, code = run("describe", "lint_query")
		Expect(code).To(Equal(1))
		Expect(errOut).To(HavePrefix("error: want: describe tool NAME, or describe tool/NAME"))
	})

	It("describe -o json prints the description as data", func() {
		out, errOut, code := run("describe", "tool/lint_refund", "-o", "json")
		Expect(code).To(Equal(0), errOut)
		var d struct {
			Name      string         `json:"name"`
			State     string         `json:"state"`
			Entry     spec.TableTool `json:"entry"`
			Claimants []claimantOut  `json:"claimants"`
		}
		Expect(json.Unmarshal([]byte(out), &d)).To(Succeed())
		Expect(d.Name).To(Equal("lint_refund"))
		Expect(d.State).To(Equal("Published"))
		Expect(d.Entry.ToolSet.String()).To(Equal("crm/crm-tools"))
		Expect(string(d.Entry.InputSchema)).To(ContainSubstring(`"enum"`))
		Expect(d.Claimants).To(Equal([]claimantOut{
			{ToolSet: "crm/crm-tools", State: "Published"},
			{ToolSet: "shop/shop-tools", State: "Conflicted", Reason: "the name is owned by ToolSet crm/crm-tools"},
		}))

		out, _, code = run("describe", "tool", "lint_query", "lint_bad_schema", "-o", "yaml")
		Expect(code).To(Equal(0))
		var ds []map[string]any
		Expect(yaml.Unmarshal([]byte(out), &ds)).To(Succeed())
		Expect(ds).To(HaveLen(2))
		Expect(ds[1]["state"]).To(Equal("Not published"))
	})

	It("lint -o json prints the plan as data, with the same exit code", func() {
		doc := writeDoc(
			schemaTool("lint_refund", `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			schemaTool("lint_query", querySchema),
		)
		out, errOut, code := run("lint", doc, "-n", "crm", "--toolset", "crm-tools", "-o", "json")
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("lint failed: 1 breaking change\n"))
		var r lintReport
		Expect(json.Unmarshal([]byte(out), &r)).To(Succeed())
		Expect(r.ToolSet).To(Equal("crm/crm-tools"))
		Expect(r.Against).To(Equal("cluster"))
		Expect(r.Breaking).To(Equal(1))
		Expect(r.Failures).To(Equal([]string{"1 breaking change"}))
		Expect(r.Counts).To(HaveKeyWithValue("Published", 2))
		Expect(r.Tools).To(HaveLen(2))
		Expect(r.Tools[1]).To(Equal(planRow{Name: "lint_refund", State: "Published", Detail: "changed: 1 breaking change",
			Changes: []contract.Change{{Path: "inputSchema.properties.reason", Breaking: true, Message: `property "reason" was removed`}}}))
	})

	It("lint --offline compares two documents with no cluster at all", func() {
		old := writeDoc(schemaTool("off_refund", refundSchema), schemaTool("off_gone", querySchema), schemaTool("off_same", querySchema))
		next := writeDoc(
			schemaTool("off_refund", `{"type":"object","properties":{"id":{"type":"string"},"reason":{"type":"string","enum":["damaged","late"]}},"required":["id"]}`),
			schemaTool("off_same", querySchema),
			schemaTool("off_new", querySchema),
			schemaTool("off_bad", `{"type":"string"}`),
		)
		// No kubeconfig, no cluster: a server that does not exist.
		var outB, errB bytes.Buffer
		root := newRootCommand(&outB, &errB)
		root.SetArgs([]string{"--server", "https://127.0.0.1:1", "lint", "--offline", old, next})
		code := 0
		if err := root.ExecuteContext(context.Background()); err != nil {
			code = printError(&errB, err)
		}
		out, errOut := outB.String(), errB.String()
		GinkgoWriter.Println(out, errOut)
		Expect(code).To(Equal(1))
		Expect(out).To(HavePrefix("Plan for " + next))
		Expect(out).To(MatchRegexp(`(?m)^\s+off_bad\s+Invalid\s+inputSchema must be a JSON Schema with "type": "object"$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+off_gone\s+Removed\s+`))
		Expect(out).To(MatchRegexp(`(?m)^\s+off_new\s+Published\s+new$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+off_refund\s+Published\s+changed: 1 breaking change$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+off_same\s+Published\s+unchanged$`))
		Expect(out).To(ContainSubstring("Breaking changes against " + old + ":\n  off_gone: the tool was removed\n  off_refund: inputSchema.properties.reason: enum values removed: \"other\"\n"))
		Expect(errOut).To(Equal("lint failed: 2 breaking changes\n"))

		_, errOut, code = run("lint", "--offline", old)
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: lint --offline takes two documents, OLD and NEW; got 1\n"))
	})

	It("lint prints the plan against the live cluster, breaking changes with their JSON paths, and exits 1", func() {
		doc := writeDoc(
			schemaTool("lint_refund", `{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"number"},"reason":{"type":"string","enum":["damaged","late"]}},"required":["id","amount"]}`),
			schemaTool("lint_export", querySchema),
			schemaTool("lint_fine", querySchema),
			schemaTool("lint_worse", `{"type":"array"}`),
		)
		out, errOut, code := run("lint", doc, "-n", "crm", "--toolset", "crm-tools")
		Expect(code).To(Equal(1))
		Expect(out).To(HavePrefix("Plan for ToolSet crm/crm-tools from " + doc))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_export\s+Published\s+new$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_fine\s+Conflicted\s+owned by ToolSet crm/crm-broken$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_query\s+Removed\s+published now; the document no longer offers it$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_refund\s+Published\s+changed: 2 breaking changes$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_worse\s+Invalid\s+inputSchema must be a JSON Schema with "type": "object"$`))
		Expect(out).To(ContainSubstring("Breaking changes against what is published now:\n" +
			"  lint_query: the tool was removed\n" +
			`  lint_refund: inputSchema.properties.amount: property "amount" was added and is required` + "\n" +
			`  lint_refund: inputSchema.properties.reason: enum values removed: "other"` + "\n"))
		Expect(out).To(ContainSubstring("Plan: 2 published, 1 conflicted, 0 denied, 1 invalid, 0 filtered, 1 removed; 3 breaking changes."))
		Expect(errOut).To(Equal("lint failed: 3 breaking changes, 1 conflicted name\n"))

		By("nothing changed in the cluster")
		out, _, _ = run("tools", "-n", "crm")
		Expect(out).To(ContainSubstring("lint_query"))
		Expect(out).NotTo(ContainSubstring("lint_export"))
	})

	It("lint reads a running service's URL and exits 0 on compatible changes only", func() {
		next := newToolkitServer(
			schemaTool("lint_query", `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer"}}}`),
			schemaTool("lint_refund", refundSchema),
		)
		out, errOut, code := run("lint", next.URL, "-n", "crm", "--toolset", "crm-tools")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_query\s+Published\s+changed: 1 compatible change, none breaking$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_refund\s+Published\s+unchanged$`))
		Expect(out).To(ContainSubstring("Compatible changes:\n" + `  lint_query: inputSchema.properties.limit: optional property "limit" was added`))
		Expect(out).To(ContainSubstring("Plan: 2 published, 0 conflicted, 0 denied, 0 invalid, 0 filtered, 0 removed; 0 breaking changes."))
		Expect(errOut).To(BeEmpty())
	})

	It("lint for the losing ToolSet names the owner, and exits 1", func() {
		doc := writeDoc(schemaTool("lint_refund", refundSchema), schemaTool("lint_shop_only", querySchema))
		out, errOut, code := run("lint", doc, "-n", "shop", "--toolset", "shop-tools")
		Expect(code).To(Equal(1))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_refund\s+Conflicted\s+owned by ToolSet crm/crm-tools$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_shop_only\s+Published\s+new$`))
		Expect(errOut).To(Equal("lint failed: 1 conflicted name\n"))

		_, errOut, code = run("lint", filepath.Join(GinkgoT().TempDir(), "missing.json"), "-n", "shop")
		Expect(code).To(Equal(2))
		Expect(errOut).To(ContainSubstring("no such file"))
	})

	It("lint applies the API server's defaults to a new ToolSet, and a ToolSet's limits to the whole document", func(ctx context.Context) {
		big := `{"type":"object","description":"` + strings.Repeat("x", 70000) + `"}`
		doc := writeDoc(schemaTool("lint_big", big), schemaTool("lint_small", querySchema))
		out, errOut, code := run("lint", doc, "-n", "crm", "--toolset", "crm-next")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(HavePrefix("Plan for a new ToolSet crm/crm-next"))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_big\s+Invalid\s+inputSchema is \d+ bytes, more than limits.maxSchemaBytes 65536$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_small\s+Published\s+new$`))
		Expect(errOut).To(BeEmpty())
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "crm", Name: "crm-next"}, &v1alpha1.ToolSet{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "lint created the ToolSet: %v", err)

		tiny := &v1alpha1.ToolSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "crm-tiny"},
			Spec: v1alpha1.ToolSetSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "crm-tiny"}},
				Port:     intstr.FromString("http"),
				Limits:   v1alpha1.Limits{MaxTools: 1},
			},
		}
		Expect(k8sClient.Create(ctx, tiny)).To(Succeed())
		_, errOut, code = run("lint", doc, "-n", "crm", "--toolset", "crm-tiny")
		Expect(code).To(Equal(2))
		Expect(errOut).To(Equal("error: the operator would refuse the whole document for ToolSet crm/crm-tiny: 2 tools, more than limits.maxTools 1\n"))
	})

	It("lint names the policy that denies a name, as the operator's ownership rule decides", func(ctx context.Context) {
		policy := &v1alpha1.ToolNamePolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "refunds-team"},
			Spec:       v1alpha1.ToolNamePolicySpec{Names: []string{"lint_ref*"}, Namespaces: []string{"payments"}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(k8sClient.Delete(ctx, policy)).To(Succeed()) })
		doc := writeDoc(schemaTool("lint_refund", refundSchema), schemaTool("lint_query", querySchema))
		out, errOut, code := run("lint", doc, "-n", "crm", "--toolset", "crm-tools")
		Expect(code).To(Equal(1))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_refund\s+Denied\s+ToolNamePolicy refunds-team: the policy reserves the name for other namespaces$`))
		Expect(out).To(MatchRegexp(`(?m)^\s+lint_query\s+Published\s+unchanged$`))
		Expect(out).To(ContainSubstring("  lint_refund: the tool would no longer be published (Denied)\n"))
		Expect(out).To(ContainSubstring("Plan: 1 published, 0 conflicted, 1 denied, 0 invalid, 0 filtered, 0 removed; 1 breaking change."))
		Expect(errOut).To(Equal("lint failed: 1 breaking change, 1 denied name\n"))
	})

	It("call calls a tool through an MCP endpoint and prints its result", func() {
		out, _, code := run("call", "lint_query", "--args", `{"q":"refunds"}`, "--gateway", crm.URL+spec.MCPPath)
		Expect(code).To(Equal(0))
		Expect(out).To(Equal(`ok lint_query {"q":"refunds"}` + "\n"))

		_, errOut, code := run("call", "lint_query", "--args", `[1]`, "--gateway", crm.URL+spec.MCPPath)
		Expect(code).To(Equal(1))
		Expect(errOut).To(Equal("error: the arguments (--args) must be a JSON object\n"))
	})

	It("works as a real kubectl plugin: kubectl toolplane tools, with the binary on the PATH", func() {
		kc := kubectlWithPlugin()
		Expect(kc(nil, "plugin", "list")).To(ContainSubstring("kubectl-toolplane"))
		out := kc(nil, "toolplane", "tools", "-n", "crm")
		Expect(out).To(MatchRegexp(`(?m)^NAME\s+OWNER\s+STATE\s+ENDPOINT\s+AGE$`))
		Expect(out).To(MatchRegexp(`(?m)^lint_query\s+crm-tools\s+Published\s+http://crm-tools\.crm\.svc\.cluster\.local:8080/tools/lint_query\s+\d+s$`))
		help := kc(nil, "toolplane", "--help")
		Expect(help).To(ContainSubstring("kubectl toolplane lint ./tools.json -n crm --toolset crm-tools"))
		Expect(help).To(ContainSubstring("Usage:\n  kubectl toolplane [command]"))
		Expect(help).NotTo(MatchRegexp(`(?m)^  completion `), "kubectl's own completion completes the plugin")
		Expect(kc(nil, "toolplane", "call", "--help")).To(ContainSubstring("Usage:\n  kubectl toolplane call NAME [--args JSON | -f FILE]"))
	})

	It("completes through kubectl: commands, tool names, describe's tool/NAME, ToolSets and namespaces", func() {
		kc := kubectlWithPlugin()
		// What the shell asks kubectl for on <TAB>: kubectl runs
		// kubectl_complete-toolplane, which asks the plugin.
		complete := func(args ...string) []string {
			GinkgoHelper()
			lines := strings.Split(strings.TrimSpace(kc(nil, append([]string{"__complete", "toolplane"}, args...)...)), "\n")
			Expect(lines[len(lines)-1]).To(MatchRegexp(`^:\d+$`), "the last line is cobra's directive")
			var words []string
			for _, l := range lines[:len(lines)-1] {
				w, _, _ := strings.Cut(l, "\t")
				words = append(words, w)
			}
			return words
		}
		Expect(complete("")).To(ContainElements("tools", "describe", "lint", "call"))
		Expect(complete("call", "lint_")).To(Equal([]string{"lint_fine", "lint_query", "lint_refund"}))
		Expect(complete("describe", "")).To(Equal([]string{"tool", "tools"}))
		Expect(complete("describe", "tool", "lint_q")).To(Equal([]string{"lint_query"}))
		Expect(complete("describe", "tool/lint_r")).To(Equal([]string{"tool/lint_refund"}))
		Expect(complete("tools", "-n", "")).To(ContainElements("crm", "shop", "toolplane-system"))
		Expect(complete("lint", "tools.json", "-n", "crm", "--toolset", "crm-")).To(ContainElements("crm-broken", "crm-tools"))
		Expect(complete("lint", "tools.json", "-n", "shop", "--toolset", "")).To(Equal([]string{"shop-tools"}))
		Expect(complete("tools", "-o", "")).To(ContainElements("wide", "json", "yaml", "name", "jsonpath", "go-template", "custom-columns"))
	})

	It("prints through kubectl with -o jsonpath and --no-headers, describes tool/NAME, and calls with -f -", func() {
		kc := kubectlWithPlugin()
		Expect(kc(nil, "toolplane", "tools", "-n", "crm", "-o", "jsonpath={.items[*].metadata.name}")).To(Equal("lint_fine lint_query lint_refund"))
		out := kc(nil, "toolplane", "tools", "-n", "crm", "--no-headers")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(3))
		Expect(lines[0]).To(MatchRegexp(`^lint_fine\s+crm-broken\s+Published\s+`))

		out = kc(nil, "toolplane", "describe", "tool/lint_refund")
		Expect(out).To(MatchRegexp(`(?m)^Name:\s+lint_refund$`))
		Expect(out).To(MatchRegexp(`(?m)^Owner:\s+ToolSet crm/crm-tools$`))

		out = kc(strings.NewReader(`{"q": "refunds"}`), "toolplane", "call", "lint_query", "-f", "-", "--gateway", crm.URL+spec.MCPPath)
		Expect(out).To(Equal(`ok lint_query {"q":"refunds"}` + "\n"))
	})
})

// kubectlWithPlugin returns a runner of the real kubectl, with the plugin
// and kubectl_complete-toolplane, built and copied as `make build` does,
// first on the PATH.
func kubectlWithPlugin() func(stdin io.Reader, args ...string) string {
	GinkgoHelper()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	_, err := os.Stat(kubectl)
	Expect(err).NotTo(HaveOccurred(), "kubectl is built next to kube-apiserver by `make envtest`")
	dir := pluginDir()
	return func(stdin io.Reader, args ...string) string {
		GinkgoHelper()
		// kubectl takes the first words that are not flags as the
		// plugin's name, so the kubeconfig goes in the environment.
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.Stdin = stdin
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		GinkgoWriter.Printf("$ kubectl %v\n%s%s", args, stdout.String(), stderr.String())
		Expect(err).NotTo(HaveOccurred(), stderr.String())
		return stdout.String()
	}
}

// pluginDir builds once for the suite; AfterSuite removes it.
var pluginDir = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "kubectl-toolplane-")
	Expect(err).NotTo(HaveOccurred())
	builtPluginDir = dir
	buildPlugin(dir)
	script, err := os.ReadFile("kubectl_complete-toolplane")
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "kubectl_complete-toolplane"), script, 0o755)).To(Succeed())
	return dir
})
