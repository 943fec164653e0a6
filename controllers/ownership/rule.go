package ownership

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// State is what became of one claim of a name.
type State string

// The states of a claim.
const (
	// Owned: the claimant owns the name.
	Owned State = "Owned"
	// Conflicted: another ToolSet owns the name; the verdict names it.
	Conflicted State = "Conflicted"
	// Denied: a policy, or a ceiling decided before the rule, forbids the
	// claimant the name; the verdict names it.
	Denied State = "Denied"
	// Pending: nobody owns the name while hand-overs are held; the
	// earliest-created permitted claimant takes it once they are not.
	Pending State = "Pending"
)

// Policy reserves tool names for namespaces, as a ToolNamePolicy does.
type Policy struct {
	// Name names the policy in Denied verdicts.
	Name string
	// Names are globs in path.Match syntax; a name any of them matches is
	// reserved.
	Names []string
	// Namespaces may own the reserved names. The caller resolves any
	// namespace selector into this list. Empty reserves the names for
	// nobody.
	Namespaces []string
}

// Matches reports whether the policy reserves name. A malformed glob
// matches nothing; [NewRule] refuses one.
func (p *Policy) Matches(name string) bool {
	for _, g := range p.Names {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Permits reports whether the policy lets a ToolSet in namespace own the
// names it reserves.
func (p *Policy) Permits(namespace string) bool {
	return slices.Contains(p.Namespaces, namespace)
}

// Denial is why a claim is denied before the rule runs.
type Denial struct {
	// Policy names what denies it: a policy, or a ceiling such as
	// "OverBudget".
	Policy string
	// Reason says why, for status.
	Reason string
}

// Claimant is one ToolSet that claims a name.
type Claimant struct {
	// Created orders claimants: the earliest-created takes a free name.
	Created time.Time
	// Denied, if set, denies this claim whatever the policies say. It is
	// the hook for ceilings that the caller decides before the rule runs,
	// such as a ToolSet's or a namespace's budget of tools (OverBudget).
	Denied *Denial
}

// Contest is everything the rule needs to settle one name.
type Contest struct {
	// Name is the tool name.
	Name string
	// Owner holds the name now; the zero value for nobody.
	Owner types.NamespacedName
	// Claimants are the ToolSets that claim the name now.
	Claimants Claimants
	// Hold keeps a name whose owner is gone unowned: the caller has not yet
	// heard from every ToolSet that may claim it, as after a restart.
	Hold bool
}

// Outcome is the rule's decision for one name.
type Outcome struct {
	// Owner owns the name; the zero value for nobody.
	Owner types.NamespacedName
	// Pending: nobody owns the name because hand-overs are held, and some
	// permitted claimant waits for it.
	Pending bool
}

// Owned reports whether somebody owns the name.
func (o Outcome) Owned() bool { return o.Owner != types.NamespacedName{} }

// Verdict is what became of one claimant's claim of a name.
type Verdict struct {
	State State
	// Owner owns the name, whatever the state; the zero value for nobody.
	Owner types.NamespacedName
	// Policy names what denies a Denied claim.
	Policy string
	// Reason says why a claim is Denied or Pending.
	Reason string
}

// Rule is the ownership rule under a set of policies. The zero value has
// no policies. A Rule is immutable and safe for concurrent use.
type Rule struct {
	policies []Policy
}

// NewRule returns the rule under policies. It refuses a policy without a
// name, two policies of one name, and a malformed glob.
func NewRule(policies []Policy) (*Rule, error) {
	r := &Rule{policies: make([]Policy, 0, len(policies))}
	seen := map[string]bool{}
	for _, p := range policies {
		if p.Name == "" {
			return nil, fmt.Errorf("ownership: a policy has no name")
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("ownership: two policies named %q", p.Name)
		}
		seen[p.Name] = true
		for _, g := range p.Names {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("ownership: policy %q: name glob %q: %w", p.Name, g, err)
			}
		}
		p.Names, p.Namespaces = slices.Clone(p.Names), slices.Clone(p.Namespaces)
		r.policies = append(r.policies, p)
	}
	// Denied verdicts name the first policy by name, whatever the order the
	// caller listed them in.
	slices.SortFunc(r.policies, func(a, b Policy) int { return strings.Compare(a.Name, b.Name) })
	return r, nil
}

// Policies returns the rule's policies, sorted by name.
func (r *Rule) Policies() []Policy {
	if r == nil {
		return nil
	}
	return slices.Clone(r.policies)
}

// Permits reports whether a ToolSet in namespace may own name. If not, it
// returns the first matching policy, by name.
func (r *Rule) Permits(namespace, name string) (denier string, ok bool) {
	if r == nil {
		return "", true
	}
	for i := range r.policies {
		p := &r.policies[i]
		if !p.Matches(name) {
			continue
		}
		if p.Permits(namespace) {
			return "", true
		}
		if denier == "" {
			denier = p.Name
		}
	}
	return denier, denier == ""
}

// eligible reports whether a claimant may own the contest's name.
func (r *Rule) eligible(name string, ts types.NamespacedName, c Claimant) bool {
	if c.Denied != nil {
		return false
	}
	_, ok := r.Permits(ts.Namespace, name)
	return ok
}

// Resolve settles one name. The owner keeps it while it still claims it and
// may own it; otherwise the earliest-created eligible claimant takes it, ties
// broken by namespace/name, unless c.Hold keeps it unowned. It costs one
// lookup while the owner keeps the name, and one pass over the claimants
// when it moves.
func (r *Rule) Resolve(c Contest) Outcome {
	if cl, ok := c.Claimants.Get(c.Owner); ok && r.eligible(c.Name, c.Owner, cl) {
		return Outcome{Owner: c.Owner}
	}
	var (
		next  types.NamespacedName
		nextC Claimant
		found bool
	)
	for ts, cl := range c.Claimants.All() {
		if !r.eligible(c.Name, ts, cl) {
			continue
		}
		if !found || Earlier(ts, cl.Created, next, nextC.Created) {
			next, nextC, found = ts, cl, true
		}
	}
	switch {
	case !found:
		return Outcome{}
	case c.Hold:
		return Outcome{Pending: true}
	default:
		return Outcome{Owner: next}
	}
}

// Verdict says what became of ts's claim under the outcome o of contest c.
// ts must be one of c's claimants.
func (r *Rule) Verdict(c Contest, o Outcome, ts types.NamespacedName) Verdict {
	v := Verdict{Owner: o.Owner}
	cl, _ := c.Claimants.Get(ts)
	if cl.Denied != nil {
		v.State, v.Policy, v.Reason = Denied, cl.Denied.Policy, cl.Denied.Reason
		return v
	}
	if p, ok := r.Permits(ts.Namespace, c.Name); !ok {
		v.State, v.Policy = Denied, p
		v.Reason = "the policy reserves the name for other namespaces"
		return v
	}
	switch {
	case o.Owner == ts:
		v.State = Owned
	case o.Pending:
		v.State = Pending
		v.Reason = pendingReason
	default:
		v.State = Conflicted
	}
	return v
}

// pendingReason explains a Pending verdict.
const pendingReason = "nobody owns the name, and it is handed over once every ToolSet has been heard from since the operator started; the earliest-created claimant then takes it"

// Earlier orders claimants: creation time, then namespace, then name.
func Earlier(a types.NamespacedName, ca time.Time, b types.NamespacedName, cb time.Time) bool {
	if !ca.Equal(cb) {
		return ca.Before(cb)
	}
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name)) < 0
}

// Claim is everything one ToolSet claims.
type Claim struct {
	ToolSet types.NamespacedName
	Created time.Time
	// UID is the ToolSet object's UID; empty if unknown (see [Decide]).
	UID types.UID
	// Names are the names it offers.
	Names []string
	// Bytes and Encoded weigh each of Names for the budget (see [Entry]),
	// index by index; missing weights are zero. [Rule.ResolveAll] ignores
	// them.
	Bytes   []int64
	Encoded []int64
	// Denied are names among Names denied before the rule runs, with why.
	Denied map[string]Denial
}

// Result is the rule's outcome for a whole table.
type Result struct {
	// Owners holds the owner of every owned name.
	Owners map[string]types.NamespacedName
	// Verdicts holds, for every claimant, the verdict on each name it
	// claims.
	Verdicts map[types.NamespacedName]map[string]Verdict
}

// ResolveAll settles every name at once: owners are the owners before,
// claims what every ToolSet claims now (one claim per ToolSet), hold as in
// [Contest.Hold]. It is [Rule.Resolve] applied to each name; the publisher
// applies it name by name as claims change.
func (r *Rule) ResolveAll(owners map[string]types.NamespacedName, claims []Claim, hold bool) Result {
	contests := map[string]*Contest{}
	for _, cl := range claims {
		for _, name := range cl.Names {
			c := contests[name]
			if c == nil {
				c = &Contest{Name: name, Owner: owners[name], Hold: hold}
				contests[name] = c
			}
			claimant := Claimant{Created: cl.Created}
			if d, ok := cl.Denied[name]; ok {
				claimant.Denied = &d
			}
			c.Claimants.Set(cl.ToolSet, claimant)
		}
	}
	res := Result{Owners: map[string]types.NamespacedName{}, Verdicts: map[types.NamespacedName]map[string]Verdict{}}
	for _, name := range slices.Sorted(maps.Keys(contests)) {
		c := contests[name]
		o := r.Resolve(*c)
		if o.Owned() {
			res.Owners[name] = o.Owner
		}
		for ts := range c.Claimants.All() {
			vs := res.Verdicts[ts]
			if vs == nil {
				vs = map[string]Verdict{}
				res.Verdicts[ts] = vs
			}
			vs[name] = r.Verdict(*c, o, ts)
		}
	}
	return res
}
