package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxEvents bounds the recent changes describe shows.
const maxEvents = 10

type describeOptions struct {
	*options
	output string
}

func newDescribeCommand(o *options) *cobra.Command {
	do := &describeOptions{options: o}
	cmd := &cobra.Command{
		Use:   "describe (tool NAME... | tool/NAME...) [-o json|yaml]",
		Short: "Show a tool's owner, claimants, endpoints, schemas and recent changes",
		Long: `Show everything toolplane knows of one published tool name: the ToolSet that owns it
and every other ToolSet that claims it, with their states; its endpoints; its input
and output schemas, annotations and schema digest; its last breaking change; and the
recent events of its owner that concern it.

As with kubectl describe, the tool is named as "tool NAME", "tools NAME" or
"tool/NAME" (also tool.toolplane.io/NAME, as -o name prints it), and several may
be named at once. Names are cluster-wide, so describe looks in every namespace.

With -o json or yaml, it prints the same as data: one object for one name, a list
for several.`,
		Example: `  kubectl toolplane describe tool crm_query_customer
  kubectl toolplane describe tool/crm_query_customer -o json

  # Every tool of a namespace
  kubectl toolplane tools -n crm -o name | xargs kubectl toolplane describe`,
		Args: func(_ *cobra.Command, args []string) error {
			_, err := describeNames(args)
			return err
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch {
			case len(args) == 0 && !strings.Contains(toComplete, "/"):
				return []string{"tool", "tools"}, cobra.ShellCompDirectiveNoFileComp
			case len(args) == 0:
				typ, prefix, _ := strings.Cut(toComplete, "/")
				if _, ok := toolTypes[typ]; !ok {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				var out []string
				for _, n := range o.completeTools(cmd.Context(), prefix) {
					out = append(out, typ+"/"+n)
				}
				return out, cobra.ShellCompDirectiveNoFileComp
			case strings.Contains(args[0], "/"):
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return o.completeTools(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := describeNames(args)
			if err != nil {
				return err
			}
			return do.run(cmd.Context(), names)
		},
	}
	addReportOutputFlag(cmd, &do.output, "the description as data")
	return cmd
}

// toolTypes are the words kubectl users name a tool's type with.
var toolTypes = map[string]bool{"tool": true, "tools": true, "tool." + v1alpha1.GroupVersion.Group: true}

// describeNames takes the names out of "tool NAME..." or "tool/NAME...".
func describeNames(args []string) ([]string, error) {
	const want = "want: describe tool NAME, or describe tool/NAME"
	if len(args) == 0 {
		return nil, fmt.Errorf("%s", want)
	}
	if toolTypes[args[0]] {
		if len(args) == 1 {
			return nil, fmt.Errorf("%s: name the tool", want)
		}
		for _, a := range args[1:] {
			if strings.Contains(a, "/") {
				return nil, fmt.Errorf("there is no need to name a type (%s) when it is given as %q", a, args[0])
			}
		}
		return args[1:], nil
	}
	var names []string
	for _, a := range args {
		typ, name, ok := strings.Cut(a, "/")
		if !ok {
			return nil, fmt.Errorf("%s: %q names no type", want, a)
		}
		if !toolTypes[typ] {
			return nil, fmt.Errorf("the type %q is not tool: kubectl toolplane describes tools only", typ)
		}
		if name == "" {
			return nil, fmt.Errorf("%s: %q names no tool", want, a)
		}
		names = append(names, name)
	}
	return names, nil
}

// description is what describe shows of one name, as data.
type description struct {
	Name string `json:"name"`
	// State is Published or Stale for a name in the table, else
	// "Not published".
	State              string                   `json:"state"`
	Entry              *spec.TableTool          `json:"entry,omitempty"`
	Claimants          []claimantOut            `json:"claimants"`
	LastBreakingChange *v1alpha1.BreakingChange `json:"lastBreakingChange,omitempty"`
	RecentEvents       []eventOut               `json:"recentEvents"`
}

type eventOut struct {
	Time    *metav1.Time `json:"time,omitempty"`
	ToolSet string       `json:"toolSet"`
	Type    string       `json:"type"`
	Reason  string       `json:"reason"`
	Note    string       `json:"note"`
}

func (do *describeOptions) run(ctx context.Context, names []string) error {
	if err := checkReportFormat(do.output); err != nil {
		return err
	}
	c, cl, err := do.read(ctx, "")
	if err != nil {
		return err
	}
	var descs []*description
	for _, name := range names {
		d, err := describe(ctx, c, cl, name)
		if err != nil {
			return err
		}
		descs = append(descs, d)
	}
	if do.output != "" {
		if len(descs) == 1 {
			return printData(do.out, do.output, descs[0])
		}
		return printData(do.out, do.output, descs)
	}
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(do.out)
		}
		if err := d.print(do.out); err != nil {
			return err
		}
	}
	return nil
}

func describe(ctx context.Context, c client.Client, cl *cluster, name string) (*description, error) {
	d := &description{Name: name, State: "Not published", Claimants: []claimantOut{}, RecentEvents: []eventOut{}}
	for i := range cl.table.Tools {
		if cl.table.Tools[i].Name == name {
			d.Entry = &cl.table.Tools[i]
		}
	}
	claimants := cl.claimants(name)
	if d.Entry == nil && len(claimants) == 0 {
		return nil, fmt.Errorf("tool %q not found: no ToolSet publishes or claims it", name)
	}
	if d.Entry != nil {
		d.State = cl.stateOf(*d.Entry)
	}
	for _, c := range claimants {
		d.Claimants = append(d.Claimants, claimantOut{ToolSet: c.toolSet, State: string(c.status.State), Reason: c.status.Reason})
		if d.LastBreakingChange == nil && c.status.LastBreakingChange != nil && (d.Entry == nil || c.toolSet == d.Entry.ToolSet.String()) {
			d.LastBreakingChange = c.status.LastBreakingChange
		}
	}
	events, err := toolEvents(ctx, c, name, claimants)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		out := eventOut{ToolSet: e.Regarding.Namespace + "/" + e.Regarding.Name, Type: e.Type, Reason: e.Reason, Note: e.Note}
		if t := eventTime(e); !t.IsZero() {
			out.Time = &metav1.Time{Time: t}
		}
		d.RecentEvents = append(d.RecentEvents, out)
	}
	return d, nil
}

func (d *description) print(out io.Writer) error {
	w := printers.GetNewTabWriter(out)
	field := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	field("Name", d.Name)
	if entry := d.Entry; entry == nil {
		field("State", d.State)
	} else {
		field("Source Name", entry.SourceName)
		field("Owner", "ToolSet "+entry.ToolSet.String())
		field("State", d.State)
		if entry.Title != "" {
			field("Title", entry.Title)
		}
		field("Description", oneLine(entry.Description))
		field("Schema Digest", or(entry.SchemaDigest, "<none>"))
		if entry.Endpoints != nil {
			fmt.Fprintln(w, "Endpoints:")
			field("  Invoke", or(entry.Endpoints.Invoke, "<none>: served only over MCP, call it with tools/call as "+entry.SourceName))
			field("  MCP", entry.Endpoints.MCP)
		} else {
			field("Endpoints", "<none>: the owner ToolSet sets no spec.service")
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out, "Claimants:")
	cw := printers.GetNewTabWriter(out)
	fmt.Fprintln(cw, "  TOOLSET\tSTATE\tREASON")
	for _, c := range d.Claimants {
		fmt.Fprintf(cw, "  %s\t%s\t%s\n", c.ToolSet, c.State, or(c.Reason, "-"))
	}
	if err := cw.Flush(); err != nil {
		return err
	}

	if entry := d.Entry; entry != nil {
		if a := entry.Annotations; a != nil {
			b, _ := json.Marshal(a)
			fmt.Fprintf(out, "Annotations:  %s\n", b)
		} else {
			fmt.Fprintln(out, "Annotations:  <none>")
		}
		printSchema(out, "Input Schema", entry.InputSchema)
		printSchema(out, "Output Schema", entry.OutputSchema)
	}

	fmt.Fprintln(out, "Last Breaking Change:")
	if last := d.LastBreakingChange; last == nil {
		fmt.Fprintln(out, "  <none>")
	} else {
		fmt.Fprintf(out, "  Revision:  %s\n  Time:      %s\n  Changes:   %s\n", or(last.Revision, "-"), last.Time.UTC().Format(time.RFC3339), last.Message)
	}

	fmt.Fprintln(out, "Recent Changes:")
	if len(d.RecentEvents) == 0 {
		fmt.Fprintln(out, "  <none>")
		return nil
	}
	ew := printers.GetNewTabWriter(out)
	fmt.Fprintln(ew, "  AGE\tTOOLSET\tTYPE\tREASON\tMESSAGE")
	for _, e := range d.RecentEvents {
		age := "<unknown>"
		if e.Time != nil {
			age = duration.HumanDuration(time.Since(e.Time.Time))
		}
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\t%s\n", age, e.ToolSet, e.Type, e.Reason, oneLine(e.Note))
	}
	return ew.Flush()
}

// toolEvents lists the latest events of the claimant ToolSets that name
// the tool, newest first.
func toolEvents(ctx context.Context, c client.Client, name string, claimants []claimant) ([]eventsv1.Event, error) {
	var out []eventsv1.Event
	listed := map[string]bool{}
	for _, cm := range claimants {
		ns := namespaceOf(cm.toolSet)
		if listed[ns] {
			continue
		}
		listed[ns] = true
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing events in %s: %w", ns, err)
		}
		for _, e := range list.Items {
			if e.Regarding.Kind != "ToolSet" || !slices.ContainsFunc(claimants, func(x claimant) bool {
				return x.toolSet == e.Regarding.Namespace+"/"+e.Regarding.Name
			}) {
				continue
			}
			if mentions(e.Note, name) {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	if len(out) > maxEvents {
		out = out[:maxEvents]
	}
	return out, nil
}

// mentions reports whether an event's note names the tool as a whole word.
func mentions(note, name string) bool {
	for i := 0; ; {
		j := strings.Index(note[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !nameByte(note[start-1])) && (end == len(note) || !nameByte(note[end])) {
			return true
		}
		i = start + 1
	}
}

func nameByte(b byte) bool {
	return b == '_' || b == '-' || b == '.' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

func eventTime(e eventsv1.Event) time.Time {
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		return e.Series.LastObservedTime.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func printSchema(w io.Writer, title string, raw json.RawMessage) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		fmt.Fprintf(w, "%s:  <none>\n", title)
		return
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "  ", "  "); err != nil {
		fmt.Fprintf(w, "%s:  <not JSON>\n", title)
		return
	}
	fmt.Fprintf(w, "%s:\n  %s\n", title, b.String())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
