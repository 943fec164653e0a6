package search_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// An agent, or the gateway, indexes the table once per revision and asks
// for the few tools a task needs.
func Example() {
	mk := func(ns, name, desc string) spec.TableTool {
		return spec.TableTool{Name: name, SourceName: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`),
			ToolSet: spec.ObjectReference{Namespace: ns, Name: ns + "-mcp"}}
	}
	tools := []spec.TableTool{
		mk("github", "github_create_issue", "Create a new issue in a GitHub repository"),
		mk("github", "github_create_pull_request", "Create a new pull request in a GitHub repository"),
		mk("k8s", "k8s_kubectl_scale", "Scale a Kubernetes deployment"),
		mk("k8s", "k8s_kubectl_logs", "Get logs from Kubernetes resources like pods, deployments, or jobs"),
	}
	spec.SortTableTools(tools)
	table := &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}

	x := search.New(table, nil)
	for _, h := range x.Search(context.Background(), "open a PR on GitHub", search.Filter{Limit: 1}) {
		fmt.Println(table.Tools[h.Index].Name)
	}
	for _, h := range x.Search(context.Background(), "bump the frontend deployment to 5 replicas", search.Filter{Limit: 1}) {
		fmt.Println(table.Tools[h.Index].Name)
	}
	// The caller's permissions: Allow is asked best first, until Limit.
	allow := func(i int) bool { return table.Tools[i].ToolSet.Namespace == "k8s" }
	for _, h := range x.Search(context.Background(), "what went wrong in my pod?", search.Filter{Limit: 1, Allow: allow}) {
		fmt.Println(table.Tools[h.Index].Name)
	}

	// The next revision: one tool added, the rest reused.
	tools = append(tools, mk("k8s", "k8s_kubectl_rollout", "Manage the rollout of a resource: undo, restart, status"))
	spec.SortTableTools(tools)
	next := &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}
	x = x.Update(next)
	for _, h := range x.Search(context.Background(), "undo the last rollout", search.Filter{Limit: 1}) {
		fmt.Println(next.Tools[h.Index].Name)
	}
	// Output:
	// github_create_pull_request
	// k8s_kubectl_scale
	// k8s_kubectl_logs
	// k8s_kubectl_rollout
}
