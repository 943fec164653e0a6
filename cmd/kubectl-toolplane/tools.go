package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type toolsOptions struct {
	*options
	allNamespaces bool
	conflicts     bool
	output        string
}

func newToolsCommand(o *options) *cobra.Command {
	to := &toolsOptions{options: o}
	cmd := &cobra.Command{
		Use:   "tools [-n NAMESPACE | -A] [--conflicts] [-o wide|json|yaml]",
		Short: "List the published tools, or the names that ToolSets contest",
		Long: `List the tools in the tool table whose owner ToolSet is in the namespace, as kubectl
lists resources: NAME, OWNER (the ToolSet), STATE (Published, or Stale while held
through an outage), ENDPOINT (the invoke URL, or the MCP URL of a tool served only
over MCP) and AGE (of the owner ToolSet).

With --conflicts, list instead every name that more than one ToolSet exposes, or
that a policy keeps from a ToolSet, with each claimant and its state.`,
		Example: `  # The tools of the current namespace
  kubectl toolplane tools

  # Every tool in the cluster, with source names, schema digests and MCP endpoints
  kubectl toolplane tools -A -o wide

  # Who claims which contested name
  kubectl toolplane tools -A --conflicts

  # The table's entries of one namespace, as JSON
  kubectl toolplane tools -n crm -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return to.run(cmd) },
	}
	cmd.Flags().BoolVarP(&to.allNamespaces, "all-namespaces", "A", false, "List the tools of every namespace.")
	cmd.Flags().BoolVar(&to.conflicts, "conflicts", false, "List the contested names and their claimants instead.")
	cmd.Flags().StringVarP(&to.output, "output", "o", "", "Output format: wide, json or yaml.")
	return cmd
}

func (to *toolsOptions) run(cmd *cobra.Command) error {
	switch to.output {
	case "", "wide", "json", "yaml":
	default:
		return fmt.Errorf("unknown output format %q: want wide, json or yaml", to.output)
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

	var tools []spec.TableTool
	for _, t := range cl.table.Tools {
		if in(t.ToolSet.Namespace) {
			tools = append(tools, t)
		}
	}
	switch to.output {
	case "json", "yaml":
		if tools == nil {
			tools = []spec.TableTool{}
		}
		return printData(to.out, to.output, &spec.Table{SchemaVersion: cl.table.SchemaVersion, Revision: cl.table.Revision, Tools: tools})
	}
	if len(tools) == 0 {
		return noneFound(to.errOut, to.allNamespaces, ns)
	}
	w := printers.GetNewTabWriter(to.out)
	header := "NAME\tOWNER\tSTATE\tENDPOINT\tAGE"
	if to.allNamespaces {
		header = "NAMESPACE\t" + header
	}
	if to.output == "wide" {
		header += "\tSOURCE NAME\tSCHEMA DIGEST\tMCP"
	}
	fmt.Fprintln(w, header)
	for _, t := range tools {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", t.Name, t.ToolSet.Name, cl.stateOf(t), endpointOf(t), cl.age(t.ToolSet))
		if to.allNamespaces {
			row = t.ToolSet.Namespace + "\t" + row
		}
		if to.output == "wide" {
			mcp := "<none>"
			if t.Endpoints != nil {
				mcp = t.Endpoints.MCP
			}
			row += fmt.Sprintf("\t%s\t%s\t%s", t.SourceName, shortDigest(t.SchemaDigest), mcp)
		}
		fmt.Fprintln(w, row)
	}
	return w.Flush()
}

// printConflicts lists each contested name of the namespace (or of every
// namespace), one row per claimant, the owner first.
func (to *toolsOptions) printConflicts(cl *cluster, in func(string) bool, ns string) error {
	type row struct{ name, toolSet, state, detail string }
	var rows []row
	var names []string
	seen := map[string]bool{}
	for _, ts := range cl.toolSets {
		for _, t := range ts.Status.Tools {
			if t.State != v1alpha1.ToolConflicted && t.State != "Denied" || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	type contested struct {
		Name      string        `json:"name"`
		Owner     string        `json:"owner,omitempty"`
		Claimants []claimantOut `json:"claimants"`
	}
	var out []contested
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
		item := contested{Name: name, Owner: owner}
		for _, c := range cs {
			detail := c.status.Reason
			if c.status.State == v1alpha1.ToolPublished {
				detail = "owns the name"
			}
			rows = append(rows, row{name, c.toolSet, string(c.status.State), detail})
			item.Claimants = append(item.Claimants, claimantOut{ToolSet: c.toolSet, State: string(c.status.State), Reason: c.status.Reason})
		}
		out = append(out, item)
	}
	switch to.output {
	case "json", "yaml":
		if out == nil {
			out = []contested{}
		}
		return printData(to.out, to.output, out)
	}
	if len(rows) == 0 {
		where := "in namespace " + ns
		if to.allNamespaces {
			where = "in the cluster"
		}
		fmt.Fprintf(to.errOut, "No contested tool names %s.\n", where)
		return nil
	}
	w := printers.GetNewTabWriter(to.out)
	fmt.Fprintln(w, "NAME\tCLAIMANT\tSTATE\tDETAIL")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.name, r.toolSet, r.state, r.detail)
	}
	return w.Flush()
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

func printData(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
