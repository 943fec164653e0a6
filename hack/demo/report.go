package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxResultChars bounds how much of a tool's result the demo prints.
const maxResultChars = 400

// report writes what the demo does and sees, for people.
type report struct{ w io.Writer }

func (r *report) step(format string, args ...any) {
	fmt.Fprintf(r.w, "==> "+format+"\n", args...)
}

// detail writes an indented line under a step.
func (r *report) detail(format string, args ...any) {
	fmt.Fprintf(r.w, "    "+format+"\n", args...)
}

// table prints the ToolSets as `kubectl get toolsets -A` would, the tool
// table with each tool's state in its owner's status, and every conflict
// as the losing ToolSet's status shows it.
func (r *report) table(st *settled) {
	r.step("ToolSets")
	tw := r.tab()
	row(tw, "NAMESPACE", "NAME", "TOOLS", "CONFLICTS", "READY", "PREFIX")
	states := map[string]v1alpha1.ToolState{}
	var conflicts [][]any
	for _, ts := range st.toolSets {
		ready := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady)
		row(tw, ts.Namespace, ts.Name, ts.Status.PublishedTools, ts.Status.ConflictedTools, ready.Status, orDash(ts.Spec.Prefix))
		ref := spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name}
		for _, t := range ts.Status.Tools {
			if t.State == v1alpha1.ToolConflicted {
				conflicts = append(conflicts, []any{ref, t.Name, t.State, t.Owner})
				continue
			}
			states[ref.String()+" "+t.Name] = t.State
		}
	}
	tw.Flush()

	r.step("The tool table: ConfigMap %s/%s, %d tools, revision %s", tableNamespace, tableName, len(st.table.Tools), short(st.table.Revision))
	tw = r.tab()
	row(tw, "TOOL", "OWNER TOOLSET", "STATE", "INVOKE ENDPOINT")
	for _, t := range st.table.Tools {
		invoke := "-"
		if t.Endpoints != nil {
			invoke = t.Endpoints.Invoke
		}
		row(tw, t.Name, t.ToolSet, states[t.ToolSet.String()+" "+t.Name], invoke)
	}
	tw.Flush()

	r.step("Conflicts, as the losing ToolSet's status shows them")
	tw = r.tab()
	row(tw, "TOOLSET", "TOOL", "STATE", "OWNER")
	for _, c := range conflicts {
		row(tw, c...)
	}
	tw.Flush()
}

// hints tells how to explore what --wait keeps running.
func (r *report) hints(kubeconfig string, wls []*workload) {
	fmt.Fprintf(r.w, `
Everything is up. In another terminal:
  export KUBECONFIG=%s
  kubectl get toolsets -A
  kubectl get toolset assistant-tools -n crm -o yaml
  kubectl get configmap %s -n %s -o jsonpath='{.data.tools\.json}'
The workloads, as the operator scrapes them:
`, kubeconfig, tableName, tableNamespace)
	for _, wl := range wls {
		fmt.Fprintf(r.w, "  curl -s http://%s%s    # %s\n", wl.addr, spec.DefaultPath, wl.ref())
	}
	fmt.Fprintln(r.w, "Press Ctrl-C to stop.")
}

func (r *report) tab() *tabwriter.Writer {
	return tabwriter.NewWriter(r.w, 0, 4, 3, ' ', 0)
}

// row writes one indented row of a table.
func row(tw io.Writer, cells ...any) {
	fmt.Fprint(tw, "    ")
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	fmt.Fprintln(tw)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// short abbreviates a "sha256:<hex>" revision.
func short(rev string) string {
	if len(rev) > len("sha256:")+12 {
		return rev[:len("sha256:")+12] + "…"
	}
	return rev
}

// clip bounds a result for printing.
func clip(s string) string {
	if len(s) <= maxResultChars {
		return s
	}
	return strings.ToValidUTF8(s[:maxResultChars], "") + "…"
}
