package ownership

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return epoch.Add(time.Duration(minutes) * time.Minute) }

func ts(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func mustRule(t testing.TB, policies ...Policy) *Rule {
	t.Helper()
	r, err := NewRule(policies)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolve(t *testing.T) {
	var (
		owner    = ts("a", "owner")
		early    = ts("c", "early")
		late     = ts("b", "late")
		payments = ts("payments", "pay")
	)
	reserve := Policy{Name: "payments", Names: []string{"refund", "payments_*"}, Namespaces: []string{"payments"}}
	budget := &Denial{Policy: "OverBudget", Reason: "more than 10 tools in namespace a"}
	for _, tc := range []struct {
		name     string
		policies []Policy
		contest  Contest
		want     Outcome
		verdicts map[types.NamespacedName]Verdict
	}{{
		name:    "the first claimant of a free name takes it",
		contest: Contest{Name: "x", Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{late: {Created: at(20)}})},
		want:    Outcome{Owner: late},
		verdicts: map[types.NamespacedName]Verdict{
			late: {State: Owned, Owner: late},
		},
	}, {
		name: "the owner keeps the name against an earlier-created claimant",
		contest: Contest{Name: "x", Owner: owner, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			owner: {Created: at(30)}, early: {Created: at(10)},
		})},
		want: Outcome{Owner: owner},
		verdicts: map[types.NamespacedName]Verdict{
			owner: {State: Owned, Owner: owner},
			early: {State: Conflicted, Owner: owner},
		},
	}, {
		name: "the earliest-created claimant takes the name the owner let go",
		contest: Contest{Name: "x", Owner: owner, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			late: {Created: at(20)}, early: {Created: at(10)},
		})},
		want: Outcome{Owner: early},
		verdicts: map[types.NamespacedName]Verdict{
			late:  {State: Conflicted, Owner: early},
			early: {State: Owned, Owner: early},
		},
	}, {
		name: "a tie in creation time goes by namespace, then name",
		contest: Contest{Name: "x", Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			ts("z", "a"): {Created: at(5)}, ts("m", "z"): {Created: at(5)}, ts("m", "y"): {Created: at(5)},
		})},
		want: Outcome{Owner: ts("m", "y")},
	}, {
		name:     "a reserved name goes to the permitted namespace, whatever the claim order",
		policies: []Policy{reserve},
		contest: Contest{Name: "refund", Owner: owner, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			owner: {Created: at(0)}, payments: {Created: at(50)},
		})},
		want: Outcome{Owner: payments},
		verdicts: map[types.NamespacedName]Verdict{
			owner:    {State: Denied, Owner: payments, Policy: "payments", Reason: "the policy reserves the name for other namespaces"},
			payments: {State: Owned, Owner: payments},
		},
	}, {
		name:     "a reserved name that no permitted namespace claims is owned by nobody",
		policies: []Policy{reserve},
		contest:  Contest{Name: "payments_list", Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{owner: {Created: at(0)}})},
		want:     Outcome{},
		verdicts: map[types.NamespacedName]Verdict{
			owner: {State: Denied, Policy: "payments", Reason: "the policy reserves the name for other namespaces"},
		},
	}, {
		name:     "a name no policy matches follows the first-claim rule",
		policies: []Policy{reserve},
		contest: Contest{Name: "refunds", Owner: owner, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			owner: {Created: at(30)}, payments: {Created: at(0)},
		})},
		want: Outcome{Owner: owner},
	}, {
		name: "a claim denied before the rule loses the name it owned",
		contest: Contest{Name: "x", Owner: owner, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			owner: {Created: at(0), Denied: budget}, late: {Created: at(20)},
		})},
		want: Outcome{Owner: late},
		verdicts: map[types.NamespacedName]Verdict{
			owner: {State: Denied, Owner: late, Policy: "OverBudget", Reason: budget.Reason},
		},
	}, {
		name: "a held name whose owner let go stays unowned",
		contest: Contest{Name: "x", Owner: owner, Hold: true, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			late: {Created: at(20)}, early: {Created: at(10)},
		})},
		want: Outcome{Pending: true},
		verdicts: map[types.NamespacedName]Verdict{
			late:  {State: Pending, Reason: pendingReason},
			early: {State: Pending, Reason: pendingReason},
		},
	}, {
		name: "a held name keeps the owner that still claims it",
		contest: Contest{Name: "x", Owner: owner, Hold: true, Claimants: ClaimantsOf(map[types.NamespacedName]Claimant{
			owner: {Created: at(30)}, early: {Created: at(10)},
		})},
		want: Outcome{Owner: owner},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRule(t, tc.policies...)
			got := r.Resolve(tc.contest)
			if got != tc.want {
				t.Fatalf("Resolve = %+v, want %+v", got, tc.want)
			}
			for who, want := range tc.verdicts {
				if v := r.Verdict(tc.contest, got, who); v != want {
					t.Errorf("Verdict(%s) = %+v, want %+v", who, v, want)
				}
			}
		})
	}
}

func TestNewRuleRefusesBadPolicies(t *testing.T) {
	for _, ps := range [][]Policy{
		{{Names: []string{"x"}}},
		{{Name: "a"}, {Name: "a"}},
		{{Name: "a", Names: []string{"[x"}}},
	} {
		if _, err := NewRule(ps); err == nil {
			t.Errorf("NewRule(%+v) succeeded", ps)
		}
	}
}

func TestPermitsNamesTheFirstPolicyByName(t *testing.T) {
	r := mustRule(t,
		Policy{Name: "z", Names: []string{"x*"}, Namespaces: []string{"z"}},
		Policy{Name: "b", Names: []string{"x"}, Namespaces: []string{"b"}},
	)
	if p, ok := r.Permits("other", "x"); ok || p != "b" {
		t.Errorf("Permits(other, x) = %q, %v; want b, false", p, ok)
	}
	// Any matching policy that lists the namespace permits it.
	for _, ns := range []string{"z", "b"} {
		if _, ok := r.Permits(ns, "x"); !ok {
			t.Errorf("Permits(%s, x) = false", ns)
		}
	}
	if _, ok := (*Rule)(nil).Permits("any", "x"); !ok {
		t.Error("the nil rule denies")
	}
}

// world is a random cluster for property tests: a few namespaces, ToolSets
// and names, so that contests and ties are common.
type world struct {
	rng      *rand.Rand
	names    []string
	toolSets []types.NamespacedName
	created  map[types.NamespacedName]time.Time
}

func newWorld(seed uint64) *world {
	w := &world{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), created: map[types.NamespacedName]time.Time{}}
	for i := range 6 {
		w.names = append(w.names, fmt.Sprintf("tool_%d", i))
	}
	w.names = append(w.names, "pay_refund", "pay_list")
	for _, ns := range []string{"a", "b", "pay"} {
		for i := range 3 {
			key := ts(ns, fmt.Sprintf("ts-%d", i))
			w.toolSets = append(w.toolSets, key)
			// Few distinct times, so that ties are broken by name often.
			w.created[key] = at(w.rng.IntN(4))
		}
	}
	return w
}

func (w *world) claims() []Claim {
	var out []Claim
	for _, key := range w.toolSets {
		if w.rng.IntN(4) == 0 {
			continue
		}
		c := Claim{ToolSet: key, Created: w.created[key]}
		for _, n := range w.names {
			if w.rng.IntN(2) == 0 {
				c.Names = append(c.Names, n)
				if w.rng.IntN(10) == 0 {
					if c.Denied == nil {
						c.Denied = map[string]Denial{}
					}
					c.Denied[n] = Denial{Policy: "OverBudget", Reason: "over budget"}
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func (w *world) policies() []Policy {
	switch w.rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return []Policy{{Name: "pay", Names: []string{"pay_*"}, Namespaces: []string{"pay"}}}
	default:
		return []Policy{
			{Name: "pay", Names: []string{"pay_*"}, Namespaces: []string{"pay"}},
			{Name: "refund", Names: []string{"pay_refund", "tool_1"}, Namespaces: []string{"b"}},
			{Name: "nobody", Names: []string{"tool_5"}},
		}
	}
}

// model is the rule as DESIGN §4 states it, written apart from Resolve: sort
// every permitted claimant, keep a still-permitted owner, else take the
// first.
func model(policies []Policy, owners map[string]types.NamespacedName, claims []Claim, hold bool) map[string]types.NamespacedName {
	permitted := func(ns, name string) bool {
		matched, ok := false, false
		for _, p := range policies {
			for _, g := range p.Names {
				if m, _ := path.Match(g, name); m {
					matched = true
					ok = ok || slices.Contains(p.Namespaces, ns)
				}
			}
		}
		return !matched || ok
	}
	type cand struct {
		key     types.NamespacedName
		created time.Time
	}
	byName := map[string][]cand{}
	for _, c := range claims {
		for _, n := range c.Names {
			if _, denied := c.Denied[n]; denied || !permitted(c.ToolSet.Namespace, n) {
				continue
			}
			byName[n] = append(byName[n], cand{c.ToolSet, c.Created})
		}
	}
	out := map[string]types.NamespacedName{}
	for n, cs := range byName {
		if i := slices.IndexFunc(cs, func(c cand) bool { return c.key == owners[n] }); i >= 0 {
			out[n] = owners[n]
			continue
		}
		if hold {
			continue
		}
		slices.SortFunc(cs, func(a, b cand) int {
			if c := a.created.Compare(b.created); c != 0 {
				return c
			}
			if a.key.Namespace != b.key.Namespace {
				if a.key.Namespace < b.key.Namespace {
					return -1
				}
				return 1
			}
			if a.key.Name < b.key.Name {
				return -1
			}
			return 1
		})
		out[n] = cs[0].key
	}
	return out
}

// TestResolveAllProperties runs random sequences of claims and policies
// through ResolveAll, checking after each step what must hold whatever the
// input: the model's owners, one owner per name, stickiness, policy, the
// verdicts, and the same result for any order of the input.
func TestResolveAllProperties(t *testing.T) {
	const seeds, steps = 200, 30
	for seed := range uint64(seeds) {
		w := newWorld(seed)
		owners := map[string]types.NamespacedName{}
		for step := range steps {
			policies := w.policies()
			r := mustRule(t, policies...)
			claims := w.claims()
			hold := w.rng.IntN(5) == 0
			res := r.ResolveAll(owners, claims, hold)
			where := fmt.Sprintf("seed %d step %d", seed, step)

			if want := model(policies, owners, claims, hold); !maps.Equal(res.Owners, want) {
				t.Fatalf("%s: owners %v, the model says %v", where, res.Owners, want)
			}
			checkResult(t, where, r, owners, claims, hold, res)

			// Any order of claims, names and policies gives the same result.
			shuffled := slices.Clone(claims)
			w.rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for i := range shuffled {
				shuffled[i].Names = slices.Clone(shuffled[i].Names)
				w.rng.Shuffle(len(shuffled[i].Names), func(a, b int) {
					shuffled[i].Names[a], shuffled[i].Names[b] = shuffled[i].Names[b], shuffled[i].Names[a]
				})
			}
			ps := slices.Clone(policies)
			slices.Reverse(ps)
			if again := mustRule(t, ps...).ResolveAll(owners, shuffled, hold); !reflect.DeepEqual(again, res) {
				t.Fatalf("%s: the result depends on the order of the input", where)
			}
			owners = res.Owners
		}
	}
}

func checkResult(t *testing.T, where string, r *Rule, before map[string]types.NamespacedName, claims []Claim, hold bool, res Result) {
	t.Helper()
	claimed := map[string]map[types.NamespacedName]Claim{}
	for _, c := range claims {
		for _, n := range c.Names {
			if claimed[n] == nil {
				claimed[n] = map[types.NamespacedName]Claim{}
			}
			claimed[n][c.ToolSet] = c
		}
	}
	for n, owner := range res.Owners {
		c, ok := claimed[n][owner]
		if !ok {
			t.Fatalf("%s: %s owns %s without claiming it", where, owner, n)
		}
		if _, denied := c.Denied[n]; denied {
			t.Fatalf("%s: %s owns %s, denied to it", where, owner, n)
		}
		if p, ok := r.Permits(owner.Namespace, n); !ok {
			t.Fatalf("%s: %s owns %s against policy %s", where, owner, n, p)
		}
		if hold && before[n] != owner {
			t.Fatalf("%s: %s was handed to %s while hand-overs are held", where, n, owner)
		}
	}
	for n, cs := range claimed {
		prev := before[n]
		if c, ok := cs[prev]; ok {
			_, denied := c.Denied[n]
			if _, permitted := r.Permits(prev.Namespace, n); !denied && permitted && res.Owners[n] != prev {
				t.Fatalf("%s: %s moved from %s, which still claims it, to %s", where, n, prev, res.Owners[n])
			}
		}
		owned := 0
		for key, c := range cs {
			v, ok := res.Verdicts[key][n]
			if !ok {
				t.Fatalf("%s: no verdict for %s on %s", where, key, n)
			}
			if v.Owner != res.Owners[n] {
				t.Fatalf("%s: the verdict for %s on %s names owner %s, not %s", where, key, n, v.Owner, res.Owners[n])
			}
			_, denied := c.Denied[n]
			p, permitted := r.Permits(key.Namespace, n)
			switch {
			case denied:
				if v.State != Denied || v.Policy != c.Denied[n].Policy {
					t.Fatalf("%s: %s denied %s before the rule, verdict %+v", where, key, n, v)
				}
			case !permitted:
				if v.State != Denied || v.Policy != p {
					t.Fatalf("%s: policy %s denies %s to %s, verdict %+v", where, p, n, key, v)
				}
			case v.State == Owned:
				owned++
			case v.State == Pending:
				if !hold || res.Owners[n] != (types.NamespacedName{}) {
					t.Fatalf("%s: %s Pending on %s, which is owned or not held", where, key, n)
				}
			case v.State == Conflicted:
				if res.Owners[n] == (types.NamespacedName{}) || res.Owners[n] == key {
					t.Fatalf("%s: %s Conflicted on %s owned by %s", where, key, n, res.Owners[n])
				}
			default:
				t.Fatalf("%s: verdict %+v", where, v)
			}
		}
		if _, has := res.Owners[n]; owned != map[bool]int{true: 1, false: 0}[has] {
			t.Fatalf("%s: %d Owned verdicts on %s", where, owned, n)
		}
	}
}
