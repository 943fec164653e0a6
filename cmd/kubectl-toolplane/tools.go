package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type toolsOptions struct {
	*options
	allNamespaces bool
	conflicts     bool
	output        *outputFlags
}

func newToolsCommand(o *options) *cobra.Command {
	to := &toolsOptions{options: o}
	cmd := &cobra.Command{
		Use:   "tools [-n NAMESPACE | -A] [--conflicts] [-o FORMAT] [--no-headers]",
		Short: "List the published tools, or the names that ToolSets contest",
		Long: `List the tools in the tool table whose owner ToolSet is in the namespace, as kubectl
lists resources: NAME, OWNER (the ToolSet), STATE (Published, or Stale while held
through an outage), ENDPOINT (the invoke URL, or the MCP URL of a tool served only
over MCP) and AGE (of the owner ToolSet).

With --conflicts, list instead every name that more than one ToolSet exposes, or
that a policy keeps from a ToolSet, with each claimant and its state.

Tools are entries of the tool table, not Kubernetes objects. For kubectl's printers
(-o json, yaml, name, jsonpath, go-template, custom-columns) each is an item of a List:
kind Tool of toolplane.io/v1alpha1, metadata.name the published name,
metadata.namespace the owner ToolSet's namespace, spec the table entry as the table
holds it, and status.state. A contested name is kind ContestedName, with its owner
and claimants.`,
		Example: `  # The tools of the current namespace
  kubectl toolplane tools

  # Every tool in the cluster, with source names, schema digests and MCP endpoints
  kubectl toolplane tools -A -o wide

  # Who claims which contested name
  kubectl toolplane tools -A --conflicts

  # The names only, for a script
  kubectl toolplane tools -n crm -o jsonpath='{.items[*].metadata.name}'
  kubectl toolplane tools -n crm -o name

  # Columns of your own, without headers
  kubectl toolplane tools -A -o custom-columns=NAME:.metadata.name,DIGEST:.spec.schemaDigest --no-headers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return to.run(cmd) },
	}
	cmd.Flags().BoolVarP(&to.allNamespaces, "all-namespaces", "A", false, "List the tools of every namespace.")
	cmd.Flags().BoolVar(&to.conflicts, "conflicts", false, "List the contested names and their claimants instead.")
	to.output = newOutputFlags(cmd)
	return cmd
}

func (to *toolsOptions) run(cmd *cobra.Command) error {
	if err := to.output.validate(); err != nil {
		return err
	}
	ns, err := to.namespace()
	if err != nil {
		return err
	}
	listNS := ns
	if to.allNamespaces || to.conflicts {
		// A contested name's claimants may be anywhere.
		listNS = ""
	}
	_, cl, err := to.read(cmd.Context(), listNS)
	if err != nil {
		return err
	}
	in := func(namespace string) bool { return to.allNamespaces || namespace == ns }
	if to.conflicts {
		return to.printConflicts(cl, in, ns)
	}

	var items []*unstructured.Unstructured
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Owner", Type: "string"},
		{Name: "State", Type: "string"},
		{Name: "Endpoint", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Source Name", Type: "string", Priority: 1},
		{Name: "Schema Digest", Type: "string", Priority: 1},
		{Name: "MCP", Type: "string", Priority: 1},
	}}
	for _, t := range cl.table.Tools {
		if !in(t.ToolSet.Namespace) {
			continue
		}
		state := cl.stateOf(t)
		obj, err := object(kindTool, t.ToolSet.Namespace, t.Name, map[string]any{"spec": t, "status": map[string]string{"state": state}})
		if err != nil {
			return err
		}
		items = append(items, obj)
		mcp := "<none>"
		if t.Endpoints != nil && t.Endpoints.MCP != "" {
			mcp = t.Endpoints.MCP
		}
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells:  []any{t.Name, t.ToolSet.Name, state, endpointOf(t), cl.age(t.ToolSet), t.SourceName, shortDigest(t.SchemaDigest), mcp},
			Object: runtime.RawExtension{Object: obj},
		})
	}
	if len(items) == 0 && to.output.human() {
		return noneFound(to.errOut, to.allNamespaces, ns)
	}
	return to.output.printList(to.out, items, table, to.allNamespaces)
}

// printConflicts lists each contested name of the namespace (or of every
// namespace), one row per claimant, the owner first.
func (to *toolsOptions) printConflicts(cl *cluster, in func(string) bool, ns string) error {
	var names []string
	seen := map[string]bool{}
	for _, ts := range cl.toolSets {
		for _, t := range ts.Status.Tools {
			if t.State != v1alpha1.ToolConflicted && t.State != v1alpha1.ToolDenied || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	var items []*unstructured.Unstructured
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Claimant", Type: "string"},
		{Name: "State", Type: "string"},
		{Name: "Detail", Type: "string"},
	}}
	for _, name := range names {
		cs := cl.claimants(name)
		involved := false
		owner := ""
		for _, c := range cs {
			involved = involved || in(namespaceOf(c.toolSet))
			if c.status.State == v1alpha1.ToolConflicted && c.status.Owner != "" {
				owner = c.status.Owner
			}
		}
		if !involved {
			continue
		}
		claimants := []claimantOut{}
		for _, c := range cs {
			claimants = append(claimants, claimantOut{ToolSet: c.toolSet, State: string(c.status.State), Reason: c.status.Reason})
		}
		fields := map[string]any{"claimants": claimants}
		if owner != "" {
			fields["owner"] = owner
		}
		obj, err := object(kindContestedName, "", name, fields)
		if err != nil {
			return err
		}
		items = append(items, obj)
		for _, c := range cs {
			detail := c.status.Reason
			if c.status.State == v1alpha1.ToolPublished {
				detail = "owns the name"
			}
			table.Rows = append(table.Rows, metav1.TableRow{
				Cells:  []any{name, c.toolSet, string(c.status.State), detail},
				Object: runtime.RawExtension{Object: obj},
			})
		}
	}
	if len(items) == 0 && to.output.human() {
		where := "in namespace " + ns
		if to.allNamespaces {
			where = "in the cluster"
		}
		fmt.Fprintf(to.errOut, "No contested tool names %s.\n", where)
		return nil
	}
	return to.output.printList(to.out, items, table, false)
}

type claimantOut struct {
	ToolSet string `json:"toolSet"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

func namespaceOf(ref string) string {
	for i := range len(ref) {
		if ref[i] == '/' {
			return ref[:i]
		}
	}
	return ref
}

func noneFound(w io.Writer, all bool, ns string) error {
	if all {
		fmt.Fprintln(w, "No tools found.")
	} else {
		fmt.Fprintf(w, "No tools found in %s namespace.\n", ns)
	}
	return nil
}

// endpointOf is where an agent calls the tool: its invoke endpoint, or
// the MCP endpoint of a tool served only over MCP.
func endpointOf(t spec.TableTool) string {
	switch {
	case t.Endpoints == nil:
		return "<none>"
	case t.Endpoints.Invoke != "":
		return t.Endpoints.Invoke
	case t.Endpoints.MCP != "":
		return t.Endpoints.MCP
	}
	return "<none>"
}

// age is the age of the owner ToolSet, as kubectl prints ages.
func (cl *cluster) age(ref spec.ObjectReference) string {
	ts := cl.toolSet(ref)
	if ts == nil || ts.CreationTimestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(ts.CreationTimestamp.Time))
}

func shortDigest(d string) string {
	if d == "" {
		return "<none>"
	}
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
