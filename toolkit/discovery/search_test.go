package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func searchTools() []spec.TableTool {
	mk := func(ns, name, desc string) spec.TableTool {
		return spec.TableTool{Name: name, SourceName: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet: spec.ObjectReference{Namespace: ns, Name: ns + "-tools"}}
	}
	tools := []spec.TableTool{
		mk("crm", "crm_query_customer", "Look up a customer by e-mail address."),
		mk("billing", "billing_refund", "Refund a payment to the customer's card."),
		mk("dev", "github_create_issue", "Open an issue in a repository."),
	}
	spec.SortTableTools(tools)
	return tools
}

func TestClientSearchesTheTableItHolds(t *testing.T) {
	c := &discovery.Client{}
	if err := c.SetTable(&spec.Table{Revision: "r1", Tools: searchTools()}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Search(t.Context(), "refund the payment of a customer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || res[0].Name != "billing_refund" || res[0].Score <= 0 {
		t.Fatalf("results %+v", res)
	}
	// The result's JSON is the table entry plus a score.
	b, _ := json.Marshal(res[0])
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["name"] != "billing_refund" || m["score"] == nil || m["inputSchema"] == nil {
		t.Fatalf("JSON %s", b)
	}

	res, err = c.Search(t.Context(), "customer", &discovery.SearchOptions{Namespace: "crm"})
	if err != nil || len(res) != 1 || res[0].Name != "crm_query_customer" {
		t.Fatalf("namespace filter: %+v, %v", res, err)
	}
	if _, err := c.Search(t.Context(), "  ", nil); !errors.Is(err, discovery.ErrEmptyQuery) {
		t.Fatalf("empty query: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Search(ctx, "customer", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	// A new table is searched as soon as the client holds it: the removed
	// tool is gone, the added one found.
	tools := searchTools()[1:] // without billing_refund
	tools = append(tools, spec.TableTool{Name: "payments_reverse_charge", SourceName: "reverse_charge",
		Description: "Reverse a card charge and return the money.", InputSchema: json.RawMessage(`{}`),
		ToolSet: spec.ObjectReference{Namespace: "billing", Name: "payments"}})
	spec.SortTableTools(tools)
	if err := c.SetTable(&spec.Table{Revision: "r2", Tools: tools}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Search(t.Context(), "give a card charge's money back", nil)
	if err != nil || len(res) == 0 || res[0].Name != "payments_reverse_charge" {
		t.Fatalf("after the update: %+v, %v", res, err)
	}
	for _, r := range res {
		if r.Name == "billing_refund" {
			t.Fatalf("a removed tool was found")
		}
	}
}
