package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// Tools are not Kubernetes objects: they are entries of the tool table, a
// ConfigMap. To print them with kubectl's own printers, the commands that
// list (tools, tools --conflicts) present each entry as an object of a
// kubectl List, in toolplane's API group:
//
//	apiVersion: toolplane.io/v1alpha1
//	kind: Tool
//	metadata: {name: <published name>, namespace: <owner ToolSet's namespace>}
//	spec: <the table entry, exactly as toolkit/spec encodes it>
//	status: {state: Published|Stale}
//
// so that -o json, yaml, name, jsonpath, go-template and custom-columns
// see one shape, written as kubectl users expect (metadata.name,
// .items[*]), -o name prints tool.toolplane.io/NAME, which `describe`
// takes back, and --no-headers, -A's NAMESPACE column and -o wide come
// from kubectl's table printer. The entry stays whole under spec, rather
// than being reshaped into an invented API, so a script reads the fields
// the table documents.
const (
	kindTool          = "Tool"
	kindContestedName = "ContestedName"
)

// outputFlags are -o and --no-headers of a command that lists, bound to
// kubectl's printers.
type outputFlags struct {
	print     *genericclioptions.PrintFlags
	noHeaders bool
}

func newOutputFlags(cmd *cobra.Command) *outputFlags {
	f := &outputFlags{print: genericclioptions.NewPrintFlags("")}
	f.print.AddFlags(cmd)
	// Tools have no managedFields.
	_ = cmd.Flags().MarkHidden("show-managed-fields")
	cmd.Flags().Lookup("output").Usage = "Output format. One of: (" + strings.Join(f.allowed(), ", ") + ")."
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "When using the default, wide or custom-columns output format, don't print headers.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.allowed(), cobra.ShellCompDirectiveNoFileComp
	})
	return f
}

func (f *outputFlags) allowed() []string {
	return append([]string{"wide", "custom-columns"}, f.print.AllowedFormats()...)
}

func (f *outputFlags) format() string { return *f.print.OutputFormat }

// human reports whether the output is a table: the default, wide or
// custom-columns.
func (f *outputFlags) human() bool {
	o := f.format()
	if t := f.print.TemplatePrinterFlags.TemplateArgument; o == "" && t != nil && *t != "" {
		// --template alone means -o go-template, as in kubectl.
		return false
	}
	return o == "" || o == "wide" || strings.HasPrefix(o, "custom-columns=")
}

// validate fails on an output format no printer takes, before anything is
// read from the cluster.
func (f *outputFlags) validate() error {
	if f.human() {
		if o := f.format(); strings.HasPrefix(o, "custom-columns=") {
			_, err := parseCustomColumns(strings.TrimPrefix(o, "custom-columns="))
			return err
		}
		return nil
	}
	_, err := f.print.ToPrinter()
	return err
}

// printList prints the objects as a List with kubectl's printers, or, for
// a human format, table (the default columns, wide ones at priority 1, each
// row's Object the item whose namespace -A prints) or the custom columns,
// with a NAMESPACE column first when withNamespace.
func (f *outputFlags) printList(w io.Writer, items []*unstructured.Unstructured, table *metav1.Table, withNamespace bool) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	for _, it := range items {
		list.Items = append(list.Items, *it)
	}
	if !f.human() {
		p, err := f.print.ToPrinter()
		if err != nil {
			return err
		}
		return p.PrintObj(list, w)
	}
	if spec, ok := strings.CutPrefix(f.format(), "custom-columns="); ok {
		cols, err := parseCustomColumns(spec)
		if err != nil {
			return err
		}
		if table, err = customColumnsTable(cols, items); err != nil {
			return err
		}
		for i := range table.Rows {
			table.Rows[i].Object = runtime.RawExtension{Object: items[i]}
		}
	}
	p := printers.NewTablePrinter(printers.PrintOptions{NoHeaders: f.noHeaders, Wide: f.format() == "wide", WithNamespace: withNamespace})
	return p.PrintObj(table, w)
}

// object makes a List item of kind, named name in namespace, with the rest
// of its fields from v's JSON. Numbers stay json.Number, exact.
func object(kind, namespace, name string, fields map[string]any) (*unstructured.Unstructured, error) {
	obj := map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       kind,
	}
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	obj["metadata"] = md
	for k, v := range fields {
		j, err := exactJSON(v)
		if err != nil {
			return nil, err
		}
		obj[k] = j
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// exactJSON turns v into the plain JSON values unstructured objects hold,
// numbers as json.Number so that no integer of a schema is rounded.
func exactJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// customColumn is one HEADER:JSONPATH of -o custom-columns.
type customColumn struct {
	header string
	path   *jsonpath.JSONPath
}

// parseCustomColumns parses -o custom-columns=NAME:.metadata.name,... as
// kubectl does: each path relative to an item, with or without braces
// and the leading dot.
func parseCustomColumns(spec string) ([]customColumn, error) {
	if spec == "" {
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
	}
	var cols []customColumn
	for _, part := range strings.Split(spec, ",") {
		header, expr, ok := strings.Cut(part, ":")
		if !ok || header == "" {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		expr = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(expr), "{"), "}")
		if !strings.HasPrefix(expr, ".") && !strings.HasPrefix(expr, "[") {
			expr = "." + expr
		}
		p := jsonpath.New(header).AllowMissingKeys(true)
		if err := p.Parse("{" + expr + "}"); err != nil {
			return nil, fmt.Errorf("custom-columns %s: %w", header, err)
		}
		cols = append(cols, customColumn{header: header, path: p})
	}
	return cols, nil
}

func customColumnsTable(cols []customColumn, items []*unstructured.Unstructured) (*metav1.Table, error) {
	t := &metav1.Table{}
	for _, c := range cols {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: c.header, Type: "string"})
	}
	for _, it := range items {
		row := metav1.TableRow{}
		for _, c := range cols {
			results, err := c.path.FindResults(it.Object)
			if err != nil {
				return nil, err
			}
			var vals []string
			for _, r := range results {
				for _, v := range r {
					var b bytes.Buffer
					if err := c.path.PrintResults(&b, []reflect.Value{v}); err != nil {
						return nil, err
					}
					vals = append(vals, b.String())
				}
			}
			cell := "<none>"
			if len(vals) > 0 {
				cell = strings.Join(vals, ",")
			}
			row.Cells = append(row.Cells, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// printData prints a plain value as JSON or YAML: for the commands whose
// output is a report rather than a list (describe, lint, call).
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

// reportFormats are the -o of describe, lint and call.
var reportFormats = []string{"json", "yaml"}

func checkReportFormat(o string) error {
	if o != "" && !slices.Contains(reportFormats, o) {
		return fmt.Errorf("unknown output format %q: want json or yaml", o)
	}
	return nil
}

func addReportOutputFlag(cmd *cobra.Command, p *string, what string) {
	cmd.Flags().StringVarP(p, "output", "o", "", "Output format: json or yaml, for "+what+".")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(reportFormats, cobra.ShellCompDirectiveNoFileComp))
}
