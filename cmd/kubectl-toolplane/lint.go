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
	timeout       time.Duration
}

func newLintCommand(o *options) *cobra.Command {
	lo := &lintOptions{options: o}
	cmd := &cobra.Command{
		Use:   "lint (URL | FILE) [-n NAMESPACE] [--toolset NAME]",
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

A URL without a path is read at the spec endpoint, ` + spec.DefaultPath + `.`,
		Example: `  # Lint what a build wrote, for the ToolSet it will ship under
  kubectl toolplane lint ./tools.json -n crm --toolset crm-tools

  # Lint a running service (port-forwarded, say)
  kubectl toolplane lint http://localhost:8080 -n crm --toolset crm-tools`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := lo.run(cmd.Context(), args[0])
			var exit *exitError
			if err != nil && !errors.As(err, &exit) {
				fmt.Fprintln(o.errOut, "Error:", err)
				return &exitError{code: 2, msg: err.Error()}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&lo.toolSet, "toolset", "", "The ToolSet that will serve the document (in -n's namespace).")
	cmd.Flags().BoolVar(&lo.allowBreaking, "allow-breaking", false, "Exit 0 on breaking changes (a deliberate major release); conflicts still fail.")
	cmd.Flags().DurationVar(&lo.timeout, "timeout", 10*time.Second, "How long to wait for a URL's document.")
	return cmd
}

// planRow is what would become of one name.
type planRow struct {
	name, state, detail string
	changes             []contract.Change
}

func (lo *lintOptions) run(ctx context.Context, src string) error {
	doc, err := lo.load(ctx, src)
	if err != nil {
		return err
	}
	ns, err := lo.namespace()
	if err != nil {
		return err
	}
	c, err := lo.newClient()
	if err != nil {
		return err
	}
	table, err := lo.readTable(ctx, c)
	if err != nil {
		return err
	}
	ts, existing, err := lo.targetToolSet(ctx, c, ns)
	if err != nil {
		return err
	}
	policies, err := loadPolicies(ctx, c)
	if err != nil {
		return err
	}
	rule, err := ownership.NewRule(policies)
	if err != nil {
		return fmt.Errorf("reading the name policies: %w", err)
	}
	claims, err := liveClaims(ctx, c, table)
	if err != nil {
		return err
	}
	self := spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name}
	selfKey := types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
	created := ts.CreationTimestamp.Time
	if !existing {
		created = time.Now()
	}

	offered, rejected, err := controllers.PlanTools(ts, doc)
	if err != nil {
		return fmt.Errorf("the operator would refuse the whole document for ToolSet %s: %w", self, err)
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
			rows = append(rows, planRow{name: t.Name, state: "Denied", detail: fmt.Sprintf("ToolNamePolicy %s: %s", v.Policy, v.Reason)})
		case v.State == ownership.Conflicted:
			rows = append(rows, planRow{name: t.Name, state: "Conflicted", detail: "owned by ToolSet " + v.Owner.String()})
		case v.State == ownership.Pending:
			rows = append(rows, planRow{name: t.Name, state: "Pending", detail: v.Reason})
		case !published || cur.ToolSet != self:
			rows = append(rows, planRow{name: t.Name, state: "Published", detail: "new"})
		default:
			kept[t.Name] = true
			changes := contract.Compare(contract.FromTableTool(cur), contract.FromTableTool(t))
			row := planRow{name: t.Name, state: "Published", changes: changes}
			switch n := len(contract.Breaking(changes)); {
			case len(changes) == 0:
				row.detail = "unchanged"
			case n > 0:
				row.detail = fmt.Sprintf("changed: %s", plural(n, "breaking change"))
			default:
				row.detail = fmt.Sprintf("changed: %s, none breaking", plural(len(changes), "compatible change"))
			}
			rows = append(rows, row)
		}
	}
	for _, r := range rejected {
		rows = append(rows, planRow{name: r.Name, state: string(r.State), detail: r.Reason})
	}
	for _, t := range table.Tools {
		if t.ToolSet != self || kept[t.Name] {
			continue
		}
		// Published now and not after: gone for its callers.
		if i := slices.IndexFunc(rows, func(r planRow) bool { return r.name == t.Name }); i >= 0 {
			rows[i].changes = append(rows[i].changes, contract.Change{Path: t.Name, Breaking: true,
				Message: "the tool would no longer be published (" + rows[i].state + ")"})
			continue
		}
		rows = append(rows, planRow{name: t.Name, state: "Removed", detail: "published now; the document no longer offers it",
			changes: []contract.Change{contract.Removed(t.Name)}})
	}
	slices.SortFunc(rows, func(a, b planRow) int { return strings.Compare(a.name, b.name) })

	which := "ToolSet " + self.String()
	if !existing {
		which = "a new ToolSet " + self.String()
	}
	fmt.Fprintf(lo.out, "Plan for %s from %s (revision %s), against the tool table at revision %s:\n\n",
		which, src, shortDigest(doc.Revision), shortDigest(table.Revision))
	w := printers.GetNewTabWriter(lo.out)
	fmt.Fprintln(w, "  NAME\tPLAN\tDETAIL")
	for _, r := range rows {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", r.name, r.state, oneLine(r.detail))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	count := map[string]int{}
	var breaking, compatible []string
	for _, r := range rows {
		count[r.state]++
		for _, ch := range r.changes {
			line := fmt.Sprintf("  %s: %s: %s", r.name, ch.Path, ch.Message)
			if ch.Path == r.name {
				line = fmt.Sprintf("  %s: %s", r.name, ch.Message)
			}
			if ch.Breaking {
				breaking = append(breaking, line)
			} else {
				compatible = append(compatible, line)
			}
		}
	}
	if len(breaking) > 0 {
		fmt.Fprintf(lo.out, "\nBreaking changes against what is published now:\n%s\n", strings.Join(breaking, "\n"))
	}
	if len(compatible) > 0 {
		fmt.Fprintf(lo.out, "\nCompatible changes:\n%s\n", strings.Join(compatible, "\n"))
	}
	fmt.Fprintf(lo.out, "\nPlan: %d published, %d conflicted, %d denied, %d invalid, %d filtered, %d removed; %s.\n",
		count["Published"], count["Conflicted"], count["Denied"], count["Invalid"], count["Filtered"], count["Removed"],
		plural(len(breaking), "breaking change"))

	var fail []string
	if len(breaking) > 0 && !lo.allowBreaking {
		fail = append(fail, plural(len(breaking), "breaking change"))
	}
	if n := count["Conflicted"]; n > 0 {
		fail = append(fail, plural(n, "conflicted name"))
	}
	if n := count["Denied"]; n > 0 {
		fail = append(fail, plural(n, "denied name"))
	}
	if len(fail) > 0 {
		msg := "lint failed: " + strings.Join(fail, ", ")
		fmt.Fprintln(lo.errOut, msg)
		return &exitError{code: 1, msg: msg}
	}
	return nil
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
		if body, err = readBounded(resp.Body); err != nil {
			return nil, fmt.Errorf("reading the spec document at %s: %w", u, err)
		}
	} else {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if body, err = readBounded(f); err != nil {
			return nil, fmt.Errorf("reading %s: %w", src, err)
		}
	}
	doc, err := controllers.ParseDocument(body)
	if err != nil {
		return nil, fmt.Errorf("%s is not a spec document: %w", src, err)
	}
	return doc, nil
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDocumentBytes {
		return nil, fmt.Errorf("the document is larger than %d bytes", maxDocumentBytes)
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
