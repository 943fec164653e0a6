package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The search specs' cluster: search-weather/weather-tools serves a
// forecast tool, search-shop/shop-tools a refund tool, besides whatever
// the other specs publish.
var _ = Describe("kubectl toolplane search", Ordered, func() {
	BeforeAll(func(ctx context.Context) {
		serveToolSet(ctx, "search-weather", "weather-tools", newToolkitServer(spec.Tool{
			Name: "search_weather_forecast", Description: "The weather forecast of a city for the coming days\n\x1b[31mred",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}))
		serveToolSet(ctx, "search-shop", "shop-tools", newToolkitServer(spec.Tool{
			Name: "search_refund_order", Description: "Refunds a customer's order to the card it was paid with",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`)}))
		Eventually(func(g Gomega) {
			out, _, code := run("tools", "-A")
			g.Expect(code).To(Equal(0))
			g.Expect(out).To(And(ContainSubstring("search_weather_forecast"), ContainSubstring("search_refund_order")))
		}).Should(Succeed())
	})

	It("prints the tools that fit a task, best first, with owner, state and score", func() {
		out, _, code := run("search", "weather", "forecast", "for", "a", "city")
		Expect(code).To(Equal(0))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "OWNER", "STATE", "SCORE", "DESCRIPTION"}))
		Expect(strings.Fields(lines[1])[:3]).To(Equal([]string{"search_weather_forecast", "search-weather/weather-tools", "Published"}))
		Expect(out).NotTo(ContainSubstring("\x1b"), "a tenant's description must not reach the terminal raw")

		By("-n keeps one namespace")
		out, errOut, code := run("search", "weather forecast", "-n", "search-shop")
		Expect(code).To(Equal(0))
		Expect(out + errOut).NotTo(ContainSubstring("search_weather_forecast"))

		By("-o json prints /v1/search's answer")
		out, _, code = run("search", "refund an order", "-o", "json", "--limit", "1")
		Expect(code).To(Equal(0))
		var res struct {
			Revision string `json:"revision"`
			Tools    []struct {
				spec.TableTool
				Score float64 `json:"score"`
			} `json:"tools"`
		}
		Expect(json.Unmarshal([]byte(out), &res)).To(Succeed())
		Expect(res.Tools).To(HaveLen(1))
		Expect(res.Tools[0].Name).To(Equal("search_refund_order"))
		Expect(res.Tools[0].Score).To(BeNumerically(">", 0))
		Expect(res.Tools[0].InputSchema).NotTo(BeEmpty())

		By("a bad output format or an empty query is an error")
		_, _, code = run("search", "x", "-o", "yaml")
		Expect(code).To(Equal(1))
		_, _, code = run("search", "  ")
		Expect(code).To(Equal(1))
	})

	It("asks the gateway's /v1/search with --gateway", func(ctx context.Context) {
		g := gateway.New(nil)
		DeferCleanup(g.Close)
		out, _, code := run("tools", "-A", "-o", "json")
		Expect(code).To(Equal(0))
		// tools -o json is a List of Tools, each spec a table entry as it is.
		var list struct {
			Items []struct {
				Kind string         `json:"kind"`
				Spec spec.TableTool `json:"spec"`
			} `json:"items"`
		}
		Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
		t := spec.Table{SchemaVersion: spec.SchemaVersion}
		for _, it := range list.Items {
			if it.Kind == "Tool" {
				t.Tools = append(t.Tools, it.Spec)
			}
		}
		t.Revision = spec.TableRevision(t.Tools)
		Expect(g.SetTable(&t)).To(Succeed())
		srv := httptest.NewServer(g)
		DeferCleanup(srv.Close)

		out, _, code = run("search", "refund a customer's order", "--gateway", srv.URL, "-o", "wide")
		Expect(code).To(Equal(0))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(strings.Fields(lines[0])).To(ContainElements("SOURCE", "ENDPOINT"))
		Expect(strings.Fields(lines[1])[0]).To(Equal("search_refund_order"))
		Expect(lines[1]).To(ContainSubstring("http://shop-tools.search-shop.svc.cluster.local:8080/tools/search_refund_order"))

		By("a gateway that authenticates callers: the token of --token-file, and only its grants")
		ga := gateway.New(&gateway.Options{Auth: shopOnly{}})
		DeferCleanup(ga.Close)
		Expect(ga.SetTable(&t)).To(Succeed())
		srvAuth := httptest.NewServer(ga)
		DeferCleanup(srvAuth.Close)
		tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
		Expect(os.WriteFile(tokenFile, []byte("shop-agent\n"), 0o600)).To(Succeed())
		out, _, code = run("search", "refund an order, or the weather forecast", "--gateway", srvAuth.URL, "--token-file", tokenFile)
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("search_refund_order"))
		Expect(out).NotTo(ContainSubstring("search_weather_forecast"))
		_, errOut, code := run("search", "refund", "--gateway", srvAuth.URL)
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring("401"))
	})
})

// shopOnly lets the caller of token shop-agent call the tools of
// namespace search-shop, and nothing else.
type shopOnly struct{}

func (shopOnly) Authenticate(_ context.Context, token string) (*gateway.Caller, error) {
	if token != "shop-agent" {
		return nil, gateway.ErrUnauthenticated
	}
	return &gateway.Caller{User: token}, nil
}

func (shopOnly) Allowed(_ context.Context, _ *gateway.Caller, namespace, name string) (bool, error) {
	return namespace == "search-shop" && name == "", nil
}
