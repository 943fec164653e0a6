package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

// maxDocumentBytes bounds the spec document lint reads, as the operator's
// default bounds a scrape.
const maxDocumentBytes = 4 << 20

type lintOptions struct {
	*options
	toolSet       string
	allowBreaking bool
	offline       bool
	output        string
	timeout       time.Duration
}

func newLintCommand(o *options) *cobra.Command {
	lo := &lintOptions{options: o}
	cmd := &cobra.Command{
		Use:   "lint (URL | FILE) [-n NAMESPACE] [--toolset NAME] | lint --offline OLD NEW",
		Short: "Preview what a spec document would publish, against the live cluster",
		Long: `Read a workload's spec document, from a running service or from a file a build wrote,
and print without changing anything what the operator would make of it for a ToolSet:

  Published   the name would be published: new, unchanged, or changed (compatibly or not)
  Conflicted  another ToolSet owns the name (named)
  Denied      a ToolNamePolicy reserves the name for other namespaces (named)
  Invalid     the tool breaks a rule or a limit (the reason, as the operator gives it)
  Filtered    the ToolSet's include or exclude leaves it out
  Removed     the ToolSet publishes the name now, and the document no longer has it

Each change to a published tool is classified as compatible or breaking, with its JSON
path. The ToolSet's prefix, include, exclude and limits apply; without --toolset, or when
the ToolSet does not exist yet, the document is linted as a new ToolSet's with none.

lint exits 1 when a change is breaking (unless --allow-breaking), or a name would be
Conflicted or Denied, so a CI job can gate a release on it; 2 when it cannot lint.

With --offline, lint compares two spec documents, OLD (what ships now) and NEW, with
no cluster at all: each tool of NEW is new, unchanged or changed (compatibly or not),
Invalid by the operator's rules, or Removed when only OLD has it. Names are compared
as the documents give them; no ToolSet's prefix, filters or limits apply, and neither
ownership nor policies.

With -o json or yaml, the plan is printed as data, and the exit code is the same.

A URL without a path is read at the spec endpoint, ` + spec.DefaultPath + `.`,
		Example: `  # Lint what a build wrote, for the ToolSet it will ship under
  kubectl toolplane lint ./tools.json -n crm --toolset crm-tools

  # Lint a running service (port-forwarded, say)
  kubectl toolplane lint http://localhost:8080 -n crm --toolset crm-tools

  # Compare the last release's document with this build's, with no cluster
  kubectl toolplane lint --offline released/tools.json ./tools.json -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if lo.offline {
				if len(args) != 2 {
					return fmt.Errorf("lint --offline takes two documents, OLD and NEW; got %d", len(args))
				}
				return nil
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			err := lo.run(cmd.Context(), args)
			var exit *exitError
			if err != nil && !errors.As(err, &exit) {
				fmt.Fprintln(o.errOut, "error:", err)
				return &exitError{code: 2, msg: err.Error()}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&lo.toolSet, "toolset", "", "The ToolSet that will serve the document (in -n's namespace).")
	cmd.Flags().BoolVar(&lo.allowBreaking, "allow-breaking", false, "Exit 0 on breaking changes (a deliberate major release); conflicts still fail.")
	cmd.Flags().BoolVar(&lo.offline, "offline", false, "Compare two documents, OLD and NEW, without a cluster.")
	addReportOutputFlag(cmd, &lo.output, "the plan")
	cmd.Flags().DurationVar(&lo.timeout, "timeout", 10*time.Second, "How long to wait for a URL's document.")
	_ = cmd.RegisterFlagCompletionFunc("toolset", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return o.completeToolSets(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// planRow is what would become of one name.
type planRow struct {
	Name    string            `json:"name"`
	State   string            `json:"plan"`
	Detail  string            `json:"detail"`
	Changes []contract.Change `json:"changes,omitempty"`
}

// lintReport is the plan, as -o json prints it.
type lintReport struct {
	// ToolSet is the ToolSet linted for, namespace/name; empty offline.
	ToolSet string `json:"toolSet,omitempty"`
	// NewToolSet is set when that ToolSet does not exist yet.
	NewToolSet bool `json:"newToolSet,omitempty"`
	// Source is the document linted, and Revision its revision.
	Source   string `json:"source"`
	Revision string `json:"revision"`
	// Against is what it is compared with: "cluster" (the tool table at
	// AgainstRevision) or, offline, the OLD document.
	Against         string    `json:"against"`
	AgainstRevision string    `json:"againstRevision"`
	Tools           []planRow `json:"tools"`
	// Counts are the names per plan; Breaking the breaking changes.
	Counts   map[string]int `json:"counts"`
	Breaking int            `json:"breaking"`
	// Failures say why lint exits 1; none means it exits 0.
	Failures []string `json:"failures"`

	breaking, compatible []string
}

func (lo *lintOptions) run(ctx context.Context, args []string) error {
	if err := checkReportFormat(lo.output); err != nil {
		return err
	}
	var r *lintReport
	var err error
	if lo.offline {
		r, err = lo.planOffline(ctx, args[0], args[1])
	} else {
		r, err = lo.planLive(ctx, args[0])
	}
	if err != nil {
		return err
	}
	r.summarize(lo.allowBreaking)
	if lo.output != "" {
		if err := printData(lo.out, lo.output, r); err != nil {
			return err
		}
	} else if err := r.print(lo.out); err != nil {
		return err
	}
	if len(r.Failures) > 0 {
		msg := "lint failed: " + strings.Join(r.Failures, ", ")
		fmt.Fprintln(lo.errOut, msg)
		return &exitError{code: 1, msg: msg}
	}
	return nil
}

// planLive is the plan of a document for a ToolSet of the live cluster.
func (lo *lintOptions) planLive(ctx context.Context, src string) (*lintReport, error) {
	doc, err := lo.load(ctx, src)
	if err != nil {
		return nil, err
	}
	ns, err := lo.namespace()
	if err != nil {
		return nil, err
	}
	c, err := lo.newClient()
	if err != nil {
		return nil, err
	}
	table, err := lo.readTable(ctx, c)
	if err != nil {
		return nil, err
	}
	ts, existing, err := lo.targetToolSet(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	policies, err := loadPolicies(ctx, c)
	if err != nil {
		return nil, err
	}
	rule, err := ownership.NewRule(policies)
	if err != nil {
		return nil, fmt.Errorf("reading the name policies: %w", err)
	}
	claims, err := liveClaims(ctx, c, table)
	if err != nil {
		return nil, err
	}
	self := spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name}
	selfKey := types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
	created := ts.CreationTimestamp.Time
	if !existing {
		created = time.Now()
	}

	offered, rejected, err := controllers.PlanTools(ts, doc)
	if err != nil {
		return nil, fmt.Errorf("the operator would refuse the whole document for ToolSet %s: %w", self, err)
	}
	inTable := map[string]spec.TableTool{}
	for _, t := range table.Tools {
		inTable[t.Name] = t
	}
	var rows []planRow
	kept := map[string]bool{}
	for _, t := range offered {
		cur, published := inTable[t.Name]
		v := settle(rule, claims, t.Name, selfKey, created)
		switch {
		case v.State == ownership.Denied:
			rows = append(rows, planRow{Name: t.Name, State: "Denied", Detail: fmt.Sprintf("ToolNamePolicy %s: %s", v.Policy, v.Reason)})
		case v.State == ownership.Conflicted:
			rows = append(rows, planRow{Name: t.Name, State: "Conflicted", Detail: "owned by ToolSet " + v.Owner.String()})
		case v.State == ownership.Pending:
			rows = append(rows, planRow{Name: t.Name, State: "Pending", Detail: v.Reason})
		case !published || cur.ToolSet != self:
			rows = append(rows, planRow{Name: t.Name, State: "Published", Detail: "new"})
		default:
			kept[t.Name] = true
			rows = append(rows, changedRow(t.Name, contract.Compare(contract.FromTableTool(cur), contract.FromTableTool(t))))
		}
	}
	for _, r := range rejected {
		rows = append(rows, planRow{Name: r.Name, State: string(r.State), Detail: r.Reason})
	}
	var gone []string
	for _, t := range table.Tools {
		if t.ToolSet == self && !kept[t.Name] {
			gone = append(gone, t.Name)
		}
	}
	rows = removed(rows, gone)
	return &lintReport{
		ToolSet: self.String(), NewToolSet: !existing,
		Source: src, Revision: doc.Revision,
		Against: "cluster", AgainstRevision: table.Revision,
		Tools: rows,
	}, nil
}

// planOffline compares two documents, with the operator's rules for a
// ToolSet with no prefix, filters or limits, and no cluster.
func (lo *lintOptions) planOffline(ctx context.Context, oldSrc, newSrc string) (*lintReport, error) {
	oldDoc, err := lo.load(ctx, oldSrc)
	if err != nil {
		return nil, err
	}
	newDoc, err := lo.load(ctx, newSrc)
	if err != nil {
		return nil, err
	}
	ts := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Name: "(offline)"}}
	before, _, err := controllers.PlanTools(ts, oldDoc)
	if err != nil {
		return nil, fmt.Errorf("the operator would refuse the whole document %s: %w", oldSrc, err)
	}
	offered, rejected, err := controllers.PlanTools(ts, newDoc)
	if err != nil {
		return nil, fmt.Errorf("the operator would refuse the whole document %s: %w", newSrc, err)
	}
	old := map[string]spec.TableTool{}
	for _, t := range before {
		old[t.Name] = t
	}
	var rows []planRow
	kept := map[string]bool{}
	for _, t := range offered {
		cur, ok := old[t.Name]
		if !ok {
			rows = append(rows, planRow{Name: t.Name, State: "Published", Detail: "new"})
			continue
		}
		kept[t.Name] = true
		rows = append(rows, changedRow(t.Name, contract.Compare(contract.FromTableTool(cur), contract.FromTableTool(t))))
	}
	for _, r := range rejected {
		rows = append(rows, planRow{Name: r.Name, State: string(r.State), Detail: r.Reason})
	}
	var gone []string
	for _, t := range before {
		if !kept[t.Name] {
			gone = append(gone, t.Name)
		}
	}
	rows = removed(rows, gone)
	return &lintReport{
		Source: newSrc, Revision: newDoc.Revision,
		Against: oldSrc, AgainstRevision: oldDoc.Revision,
		Tools: rows,
	}, nil
}

// changedRow is the row of a name published before and after.
func changedRow(name string, changes []contract.Change) planRow {
	row := planRow{Name: name, State: "Published", Changes: changes}
	switch n := len(contract.Breaking(changes)); {
	case len(changes) == 0:
		row.Detail = "unchanged"
	case n > 0:
		row.Detail = fmt.Sprintf("changed: %s", plural(n, "breaking change"))
	default:
		row.Detail = fmt.Sprintf("changed: %s, none breaking", plural(len(changes), "compatible change"))
	}
	return row
}

// removed adds what is published now and would not be after: gone for its
// callers. A name the plan has a row for (Invalid now, say) gets the change
// on that row. The rows come back sorted by name.
func removed(rows []planRow, gone []string) []planRow {
	for _, name := range gone {
		if i := slices.IndexFunc(rows, func(r planRow) bool { return r.Name == name }); i >= 0 {
			rows[i].Changes = append(rows[i].Changes, contract.Change{Path: name, Breaking: true,
				Message: "the tool would no longer be published (" + rows[i].State + ")"})
			continue
		}
		rows = append(rows, planRow{Name: name, State: "Removed", Detail: "published now; the document no longer offers it",
			Changes: []contract.Change{contract.Removed(name)}})
	}
	slices.SortFunc(rows, func(a, b planRow) int { return strings.Compare(a.Name, b.Name) })
	if rows == nil {
		rows = []planRow{}
	}
	return rows
}

// summarize counts the plan and says whether it fails.
func (r *lintReport) summarize(allowBreaking bool) {
	r.Counts = map[string]int{}
	for _, s := range []string{"Published", "Conflicted", "Denied", "Invalid", "Filtered", "Removed"} {
		r.Counts[s] = 0
	}
	for _, row := range r.Tools {
		r.Counts[row.State]++
		for _, ch := range row.Changes {
			line := fmt.Sprintf("  %s: %s: %s", row.Name, ch.Path, ch.Message)
			if ch.Path == row.Name {
				line = fmt.Sprintf("  %s: %s", row.Name, ch.Message)
			}
			if ch.Breaking {
				r.breaking = append(r.breaking, line)
			} else {
				r.compatible = append(r.compatible, line)
			}
		}
	}
	r.Breaking = len(r.breaking)
	r.Failures = []string{}
	if r.Breaking > 0 && !allowBreaking {
		r.Failures = append(r.Failures, plural(r.Breaking, "breaking change"))
	}
	if n := r.Counts["Conflicted"]; n > 0 {
		r.Failures = append(r.Failures, plural(n, "conflicted name"))
	}
	if n := r.Counts["Denied"]; n > 0 {
		r.Failures = append(r.Failures, plural(n, "denied name"))
	}
}

func (r *lintReport) print(out io.Writer) error {
	if r.Against == "cluster" {
		which := "ToolSet " + r.ToolSet
		if r.NewToolSet {
			which = "a new ToolSet " + r.ToolSet
		}
		fmt.Fprintf(out, "Plan for %s from %s (revision %s), against the tool table at revision %s:\n\n",
			which, r.Source, shortDigest(r.Revision), shortDigest(r.AgainstRevision))
	} else {
		fmt.Fprintf(out, "Plan for %s (revision %s), against %s (revision %s), offline:\n\n",
			r.Source, shortDigest(r.Revision), r.Against, shortDigest(r.AgainstRevision))
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "  NAME\tPLAN\tDETAIL")
	for _, row := range r.Tools {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", row.Name, row.State, oneLine(row.Detail))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	against := "what is published now"
	if r.Against != "cluster" {
		against = r.Against
	}
	if len(r.breaking) > 0 {
		fmt.Fprintf(out, "\nBreaking changes against %s:\n%s\n", against, strings.Join(r.breaking, "\n"))
	}
	if len(r.compatible) > 0 {
		fmt.Fprintf(out, "\nCompatible changes:\n%s\n", strings.Join(r.compatible, "\n"))
	}
	c := r.Counts
	_, err := fmt.Fprintf(out, "\nPlan: %d published, %d conflicted, %d denied, %d invalid, %d filtered, %d removed; %s.\n",
		c["Published"], c["Conflicted"], c["Denied"], c["Invalid"], c["Filtered"], c["Removed"],
		plural(r.Breaking, "breaking change"))
	return err
}

// targetToolSet is the ToolSet the document is linted for: the live one,
// or a new one with no prefix, filters or limits.
func (lo *lintOptions) targetToolSet(ctx context.Context, c client.Client, ns string) (*v1alpha1.ToolSet, bool, error) {
	name := lo.toolSet
	if name == "" {
		name = "(new)"
	} else {
		ts := &v1alpha1.ToolSet{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ts)
		if err == nil {
			return ts, true, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, false, fmt.Errorf("reading ToolSet %s/%s: %w", ns, name, err)
		}
	}
	// A new ToolSet gets the API server's defaults (its limits, say) from
	// a dry run, which stores nothing; without the right to create one,
	// it goes without.
	ts := &v1alpha1.ToolSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "toolplane-lint"}},
			Port:     intstr.FromString("http"),
		},
	}
	dry := ts.DeepCopy()
	if name == "(new)" {
		dry.Name, dry.GenerateName = "", "toolplane-lint-"
	}
	if err := c.Create(ctx, dry, client.DryRunAll); err == nil {
		ts.Spec = dry.Spec
	} else {
		fmt.Fprintf(lo.errOut, "Warning: linting without the API server's defaults for a new ToolSet (its limits): %v\n", err)
	}
	return ts, false, nil
}

// load reads a spec document from a URL or a file, bounded in size.
func (lo *lintOptions) load(ctx context.Context, src string) (*spec.Document, error) {
	var body []byte
	if u, err := url.Parse(src); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		if u.Path == "" || u.Path == "/" {
			u.Path = spec.DefaultPath
		}
		ctx, cancel := context.WithTimeout(ctx, lo.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("reading the spec document: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("reading the spec document at %s: HTTP %d", u, resp.StatusCode)
		}
		if body, err = readBounded(resp.Body, maxDocumentBytes); err != nil {
			return nil, fmt.Errorf("reading the spec document at %s: %w", u, err)
		}
	} else {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if body, err = readBounded(f, maxDocumentBytes); err != nil {
			return nil, fmt.Errorf("reading %s: %w", src, err)
		}
	}
	doc, err := controllers.ParseDocument(body)
	if err != nil {
		return nil, fmt.Errorf("%s is not a spec document: %w", src, err)
	}
	return doc, nil
}

// readBounded reads r to its end, or fails past limit bytes.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// loadPolicies reads the cluster's ToolNamePolicies as the operator
// resolves them, sorted by name as it applies them. Without the right to
// list them, lint cannot tell what would be Denied, so it fails rather than
// print a plan that may be wrong.
func loadPolicies(ctx context.Context, c client.Client) ([]ownership.Policy, error) {
	_, policies, _, err := controllers.ResolvePolicies(ctx, c)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(policies, func(a, b ownership.Policy) int { return strings.Compare(a.Name, b.Name) })
	return policies, nil
}

// claims are the live claims of each name: its owner in the table, and
// every ToolSet whose status lists it, with when it was created.
type claims struct {
	owners    map[string]types.NamespacedName
	claimants map[string]map[types.NamespacedName]ownership.Claimant
}

// liveClaims gathers the claims from the table and the ToolSets of every
// namespace. Without the right to list ToolSets cluster-wide, the table's
// owners alone stand in.
func liveClaims(ctx context.Context, c client.Client, table *spec.Table) (*claims, error) {
	cl := &claims{owners: map[string]types.NamespacedName{}, claimants: map[string]map[types.NamespacedName]ownership.Claimant{}}
	claim := func(name string, ts types.NamespacedName, created time.Time) {
		if cl.claimants[name] == nil {
			cl.claimants[name] = map[types.NamespacedName]ownership.Claimant{}
		}
		if _, ok := cl.claimants[name][ts]; !ok || !created.IsZero() {
			cl.claimants[name][ts] = ownership.Claimant{Created: created}
		}
	}
	var list v1alpha1.ToolSetList
	if err := c.List(ctx, &list); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing ToolSets: %w", err)
	}
	for _, ts := range list.Items {
		key := types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
		for _, t := range ts.Status.Tools {
			switch t.State {
			case v1alpha1.ToolPublished, v1alpha1.ToolStale, v1alpha1.ToolConflicted, v1alpha1.ToolPending:
				claim(t.Name, key, ts.CreationTimestamp.Time)
			case v1alpha1.ToolDenied:
				// Denied now, by a policy or a ceiling lint cannot see:
				// it stays so.
				claim(t.Name, key, ts.CreationTimestamp.Time)
				cl.claimants[t.Name][key] = ownership.Claimant{Created: ts.CreationTimestamp.Time, Denied: &ownership.Denial{Policy: "status", Reason: t.Reason}}
			}
		}
	}
	for _, t := range table.Tools {
		owner := types.NamespacedName{Namespace: t.ToolSet.Namespace, Name: t.ToolSet.Name}
		cl.owners[t.Name] = owner
		claim(t.Name, owner, time.Time{})
	}
	return cl, nil
}

// settle is what the operator's ownership rule makes of self's claim of
// name, once self's document replaces what it claims now.
func settle(rule *ownership.Rule, cl *claims, name string, self types.NamespacedName, created time.Time) ownership.Verdict {
	contest := ownership.Contest{Name: name, Owner: cl.owners[name], Claimants: ownership.ClaimantsOf(cl.claimants[name])}
	contest.Claimants.Set(self, ownership.Claimant{Created: created})
	return rule.Verdict(contest, rule.Resolve(contest), self)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
