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
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxEvents bounds the recent changes describe shows.
const maxEvents = 10

func newDescribeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe tool NAME",
		Short: "Show a tool's owner, claimants, endpoints, schemas and recent changes",
		Long: `Show everything toolplane knows of one published tool name: the ToolSet that owns it
and every other ToolSet that claims it, with their states; its endpoints; its input
and output schemas, annotations and schema digest; its last breaking change; and the
recent events of its owner that concern it.

Names are cluster-wide, so describe looks in every namespace.`,
		Example: `  kubectl toolplane describe tool crm_query_customer`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 || args[0] != "tool" {
				return fmt.Errorf("want: describe tool NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.describe(cmd.Context(), args[1]) },
	}
	return cmd
}

func (o *options) describe(ctx context.Context, name string) error {
	c, cl, err := o.read(ctx, "")
	if err != nil {
		return err
	}
	var entry *spec.TableTool
	for i := range cl.table.Tools {
		if cl.table.Tools[i].Name == name {
			entry = &cl.table.Tools[i]
		}
	}
	claimants := cl.claimants(name)
	if entry == nil && len(claimants) == 0 {
		return fmt.Errorf("tool %q not found: no ToolSet publishes or claims it", name)
	}

	w := printers.GetNewTabWriter(o.out)
	field := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	field("Name", name)
	if entry == nil {
		field("State", "Not published")
	} else {
		field("Source Name", entry.SourceName)
		field("Owner", "ToolSet "+entry.ToolSet.String())
		field("State", cl.stateOf(*entry))
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

	fmt.Fprintln(o.out, "Claimants:")
	cw := printers.GetNewTabWriter(o.out)
	fmt.Fprintln(cw, "  TOOLSET\tSTATE\tREASON")
	for _, c := range claimants {
		fmt.Fprintf(cw, "  %s\t%s\t%s\n", c.toolSet, c.status.State, or(c.status.Reason, "-"))
	}
	if err := cw.Flush(); err != nil {
		return err
	}

	if entry != nil {
		if a := entry.Annotations; a != nil {
			b, _ := json.Marshal(a)
			fmt.Fprintf(o.out, "Annotations:  %s\n", b)
		} else {
			fmt.Fprintln(o.out, "Annotations:  <none>")
		}
		printSchema(o.out, "Input Schema", entry.InputSchema)
		printSchema(o.out, "Output Schema", entry.OutputSchema)
	}

	fmt.Fprintln(o.out, "Last Breaking Change:")
	var last *v1alpha1.BreakingChange
	for _, c := range claimants {
		if c.status.LastBreakingChange != nil && (entry == nil || c.toolSet == entry.ToolSet.String()) {
			last = c.status.LastBreakingChange
			break
		}
	}
	if last == nil {
		fmt.Fprintln(o.out, "  <none>")
	} else {
		fmt.Fprintf(o.out, "  Revision:  %s\n  Time:      %s\n  Changes:   %s\n", or(last.Revision, "-"), last.Time.UTC().Format(time.RFC3339), last.Message)
	}

	fmt.Fprintln(o.out, "Recent Changes:")
	events, err := toolEvents(ctx, c, name, claimants)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		fmt.Fprintln(o.out, "  <none>")
		return nil
	}
	ew := printers.GetNewTabWriter(o.out)
	fmt.Fprintln(ew, "  AGE\tTOOLSET\tTYPE\tREASON\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\t%s\n", eventAge(e), e.Regarding.Namespace+"/"+e.Regarding.Name, e.Type, e.Reason, oneLine(e.Note))
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

func eventAge(e eventsv1.Event) string {
	t := eventTime(e)
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
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
