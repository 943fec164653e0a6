package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The ownership model test drives real TablePublishers on the API server
// through random sequences of ToolSet creations and deletions, prefix and
// tool changes, Pods going ready and unready (offers going empty and coming
// back), a ToolSet deleted and created again under its name with no Withdraw
// between (a new UID, a new creation time), policy changes, budgets (none,
// per namespace, of the table's bytes; changed by the admin at a restart),
// restarts and leader failovers (a new publisher that reads the table back,
// after the old one stopped cleanly or was cut off from the API server right
// after a change, having written it whole, in part or not at all). After
// every step it compares the owner of every published name with a reference
// model of DESIGN §4, checks that status says Published exactly for what the
// stored table and the ledger hold (and never ahead of the table, even
// mid-step or cut off), and a watch on the table checks that no version of it
// lacked a tool whose owner kept serving it. A run of 500 steps or more fails
// if it never made one of its changes or faults.
//
// `make test` runs it with a fixed seed; `make model-test` runs it longer
// with random seeds (MODEL_SEED, MODEL_STEPS).

// modelDefaultSeed and modelDefaultSteps keep `make test` fast.
const (
	modelDefaultSeed  = 20261130
	modelDefaultSteps = 60
)

func modelParams() (seed uint64, steps int) {
	GinkgoHelper()
	seed, steps = modelDefaultSeed, modelDefaultSteps
	switch s := os.Getenv("MODEL_SEED"); s {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano())
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		Expect(err).NotTo(HaveOccurred(), "MODEL_SEED is a number or random")
		seed = v
	}
	if s := os.Getenv("MODEL_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		Expect(err).NotTo(HaveOccurred(), "MODEL_STEPS is a number")
		steps = v
	}
	return seed, steps
}

// modelToolSet is one ToolSet of the model: whether it exists, whether its
// Pods are ready, and the tools they serve.
type modelToolSet struct {
	key     types.NamespacedName
	exists  bool
	created time.Time
	uid     types.UID
	serving bool
	prefix  string
	tools   []string
}

// offered is what the reconciler offers for it: nothing while no Pod is
// ready (its grace period over), else the prefixed tools.
func (m *modelToolSet) offered() []string {
	if !m.exists || !m.serving {
		return nil
	}
	out := make([]string, len(m.tools))
	for i, t := range m.tools {
		out[i] = m.prefix + t
	}
	return out
}

// modelRule is the reference rule, written apart from package ownership:
// a name any policy matches may be owned only in a namespace some matching
// policy lists; the owner keeps a name it still claims and may own; else the
// earliest-created permitted claimant takes it, ties by namespace/name.
func modelRule(policies []ownership.Policy, prev map[string]types.NamespacedName, toolSets []*modelToolSet) map[string]types.NamespacedName {
	permitted := func(ns, name string) bool {
		matched := false
		for _, p := range policies {
			for _, g := range p.Names {
				if ok, _ := path.Match(g, name); ok {
					matched = true
					if slices.Contains(p.Namespaces, ns) {
						return true
					}
				}
			}
		}
		return !matched
	}
	claimants := map[string][]*modelToolSet{}
	for _, m := range toolSets {
		for _, name := range m.offered() {
			if permitted(m.key.Namespace, name) {
				claimants[name] = append(claimants[name], m)
			}
		}
	}
	out := map[string]types.NamespacedName{}
	for name, cs := range claimants {
		if slices.ContainsFunc(cs, func(m *modelToolSet) bool { return m.key == prev[name] }) {
			out[name] = prev[name]
			continue
		}
		first := slices.MinFunc(cs, func(a, b *modelToolSet) int {
			return cmp.Or(a.created.Compare(b.created), strings.Compare(a.key.Namespace, b.key.Namespace), strings.Compare(a.key.Name, b.key.Name))
		})
		out[name] = first.key
	}
	return out
}

// namespacesReader lists only the ToolSets of some namespaces: the model's
// cluster.
type namespacesReader struct {
	client.Reader
	namespaces []string
}

func (r namespacesReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*v1alpha1.ToolSetList); ok {
		l.Items = slices.DeleteFunc(l.Items, func(ts v1alpha1.ToolSet) bool { return !slices.Contains(r.namespaces, ts.Namespace) })
	}
	return nil
}

// cutClient is a leader's client cut off from the API server after allow
// more writes: a leader that crashes or loses the network in the middle of
// writing the table. Reads still go through.
type cutClient struct {
	client.Client
	allow atomic.Int64
}

// errCut is every write of a cutClient past its allowance.
var errCut = errors.New("model: the leader is cut off from the API server")

func newCutClient(c client.Client) *cutClient {
	cc := &cutClient{Client: c}
	cc.allow.Store(math.MaxInt64)
	return cc
}

func (c *cutClient) write() error {
	if c.allow.Add(-1) < 0 {
		return errCut
	}
	return nil
}

func (c *cutClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *cutClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *cutClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *cutClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *cutClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *cutClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

var _ = Describe("The ownership model", func() {
	It("publishes every name to the model's owner through random changes, restarts and failovers, and never drops a served tool", func(ctx context.Context) {
		seed, steps := modelParams()
		rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
		GinkgoWriter.Printf("model test: seed %d, %d steps (rerun: make model-test MODEL_SEED=%d MODEL_STEPS=%d)\n", seed, steps, seed, steps)
		AddReportEntry("model seed", seed, ReportEntryVisibilityAlways)

		tableNs := newNamespace(ctx)
		nsA, nsB, nsPay := newNamespace(ctx), newNamespace(ctx), newNamespace(ctx)
		var toolSets []*modelToolSet
		for i, ns := range []string{nsA, nsA, nsB, nsB, nsPay, nsPay} {
			toolSets = append(toolSets, &modelToolSet{key: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("ts-%d", i)}})
		}
		baseTools := []string{"t0", "t1", "t2", "t3", "pay_refund"}
		policySets := [][]ownership.Policy{
			nil,
			{{Name: "payments", Names: []string{"pay_*", "x_pay_*"}, Namespaces: []string{nsPay}}},
			{
				{Name: "payments", Names: []string{"pay_*", "x_pay_*"}, Namespaces: []string{nsPay}},
				{Name: "team-b", Names: []string{"t1", "x_t1"}, Namespaces: []string{nsB}},
			},
			{{Name: "locked", Names: []string{"t0"}}},
		}
		policy := 0
		owners := map[string]types.NamespacedName{}

		// The admin's budget for the run, kept across restarts: none, a cap
		// of tools per namespace, or of the table's bytes (about seven
		// entries). With none, the owners follow modelRule, written apart
		// from package ownership; with one, they follow ownership.Decide,
		// the function the publisher applies incrementally.
		sample := entrySizes([]spec.TableTool{entry(toolSets[0].key, "x_pay_refund", "pay_refund")})[0]
		budgets := []ownership.Budget{{}, {MaxToolsPerNamespace: 3}, {MaxTableBytes: 7 * int64(sample)}}
		budget := budgets[(seed+1)%uint64(len(budgets))]
		GinkgoWriter.Printf("model test: budget %+v\n", budget)
		counts := map[string]int{}
		// decision is the reference's last decision, for the verdicts.
		var decision ownership.Decision
		reference := func(prev map[string]types.NamespacedName) map[string]types.NamespacedName {
			if budget == (ownership.Budget{}) {
				return modelRule(policySets[policy], prev, toolSets)
			}
			rule, err := ownership.NewRule(policySets[policy])
			Expect(err).NotTo(HaveOccurred())
			b := budget
			if b.MaxTableBytes == 0 {
				b.MaxTableBytes = int64(spec.MaxTableEntriesBytes)
			}
			in := ownership.Input{Rule: rule, Budget: b}
			for _, m := range toolSets {
				var tools []spec.TableTool
				for _, name := range m.offered() {
					// As the publisher holds it, naming the offerer's UID.
					e := entry(m.key, name, strings.TrimPrefix(name, m.prefix))
					e.ToolSetUID = string(m.uid)
					tools = append(tools, e)
				}
				if len(tools) == 0 {
					continue
				}
				cl := ownership.Claim{ToolSet: m.key, Created: m.created, UID: m.uid}
				for i, size := range entrySizes(tools) {
					cl.Names = append(cl.Names, tools[i].Name)
					cl.Bytes = append(cl.Bytes, int64(size))
				}
				in.Claims = append(in.Claims, cl)
			}
			l := ownership.Ledger{}
			for name, owner := range prev {
				l[name] = ownership.Record{Owner: owner}
			}
			decision = ownership.Decide(l, in)
			// The budget binds: some claim it denies.
			if slices.ContainsFunc(slices.Collect(maps.Values(decision.Verdicts)), func(vs map[string]ownership.Verdict) bool {
				return slices.ContainsFunc(slices.Collect(maps.Values(vs)), func(v ownership.Verdict) bool {
					return v.State == ownership.Denied && v.Policy == ownership.OverBudget
				})
			}) {
				counts["over budget"]++
			}
			out := map[string]types.NamespacedName{}
			for name, rec := range decision.Ledger {
				out[name] = rec.Owner
			}
			return out
		}

		// protected are the names whose owner serves them and that a table
		// version has shown with that owner: no later version may lack
		// them until the owner lets go. The watcher checks every version.
		var (
			mu         sync.Mutex
			protected  = map[string]types.NamespacedName{}
			violations []string
			// invariantViolations break "status Published ⇒ in the table
			// readers see", at any time.
			invariantViolations []string
		)
		unprotect := func(pred func(name string, owner types.NamespacedName) bool) {
			mu.Lock()
			defer mu.Unlock()
			maps.DeleteFunc(protected, pred)
		}
		watcher, err := harness.WatchTable(ctx, &harness.ControlPlane{Config: cfg, Scheme: scheme}, tableNs, "tools", func(t *spec.Table) {
			names := harness.Names(t)
			mu.Lock()
			defer mu.Unlock()
			for name, owner := range protected {
				if got, ok := names[name]; !ok || got.Namespace != owner.Namespace || got.Name != owner.Name {
					violations = append(violations, fmt.Sprintf("revision %s lacks %s of %s, which serves it", t.Revision, name, owner))
				}
			}
		})
		Expect(err).NotTo(HaveOccurred())

		// cut is the client of the publisher that leads: a failover cuts it
		// off after a few writes.
		var cut *cutClient
		start := func() (*TablePublisher, func()) {
			cut = newCutClient(k8sClient)
			p := &TablePublisher{
				Client:    cut,
				APIReader: namespacesReader{Reader: k8sClient, namespaces: []string{nsA, nsB, nsPay}},
				Namespace: tableNs, Name: "tools",
				// Long: after a start the window ends because every ToolSet
				// was heard from, never by the clock.
				RestoreTimeout:  time.Hour,
				WaitForPolicies: true,
				Debounce:        10 * time.Millisecond,
				MaxDelay:        100 * time.Millisecond,
				PartGracePeriod: 200 * time.Millisecond,
				Budget:          budget,
			}
			runCtx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{}, 2)
			go func() {
				defer GinkgoRecover()
				defer func() { done <- struct{}{} }()
				Expect(p.Start(runCtx)).To(Succeed())
			}()
			go func() {
				defer func() { done <- struct{}{} }()
				for {
					select {
					case <-p.Changed():
					case <-runCtx.Done():
						return
					}
				}
			}()
			var once sync.Once
			stop := func() { once.Do(func() { cancel(); <-done; <-done }) }
			DeferCleanup(stop)
			Expect(p.waitLoaded(ctx)).To(Succeed())
			return p, stop
		}

		offer := func(p *TablePublisher, m *modelToolSet) map[string]ownership.Verdict {
			GinkgoHelper()
			var tools []spec.TableTool
			for _, name := range m.offered() {
				tools = append(tools, entry(m.key, name, strings.TrimPrefix(name, m.prefix)))
			}
			verdicts, err := p.Offer(ctx, Offer{ToolSet: m.key, Created: metav1.NewTime(m.created), UID: m.uid, Tools: tools})
			Expect(err).NotTo(HaveOccurred())
			return verdicts
		}
		// checkVerdicts compares an offer's verdicts with the model once
		// every ToolSet has been heard from.
		checkVerdicts := func(m *modelToolSet, verdicts map[string]ownership.Verdict, where string) {
			GinkgoHelper()
			rule, err := ownership.NewRule(policySets[policy])
			Expect(err).NotTo(HaveOccurred())
			for _, name := range m.offered() {
				v := verdicts[name]
				want := ownership.Conflicted
				if _, ok := rule.Permits(m.key.Namespace, name); !ok {
					want = ownership.Denied
				} else if owners[name] == m.key {
					want = ownership.Owned
				} else if budget != (ownership.Budget{}) {
					want = decision.Verdicts[m.key][name].State
				}
				Expect(v.State).To(Equal(want), "%s: the verdict on %s for %s", where, name, m.key)
				Expect(v.Owner).To(Equal(owners[name]), "%s: the owner of %s told to %s", where, name, m.key)
			}
		}
		var (
			p    *TablePublisher
			stop func()
		)
		// statusAgainstTable compares what status says of every claim of
		// every ToolSet (the verdicts as the reconciler shows them) with
		// the table readers see, decoded from its ConfigMaps: a tool
		// Published is in it under its ToolSet, always. With settled, also
		// the reverse, and both agree with the ledger. It returns how they
		// disagree.
		statusAgainstTable := func(where string, settled bool) []string {
			GinkgoHelper()
			published := map[types.NamespacedName]map[string]bool{}
			inLedger := map[types.NamespacedName]map[string]bool{}
			p.mu.Lock()
			ledger := maps.Clone(p.ledger)
			p.mu.Unlock()
			for _, m := range toolSets {
				p.mu.Lock()
				verdicts := p.verdicts(m.key)
				owned := map[string]bool{}
				for name := range verdicts {
					rec, ok := p.ledger[name]
					owned[name] = ok && rec.Owner == m.key && ownership.SameObject(rec.UID, m.uid)
				}
				p.mu.Unlock()
				shown := map[string]bool{}
				for name, v := range shownVerdicts(verdicts, p.Written(m.key)) {
					tool := v1alpha1.ToolStatus{Name: name, State: v1alpha1.ToolPublished}
					var nc nameClaims
					nc.apply(&tool, v)
					shown[name] = tool.State == v1alpha1.ToolPublished
				}
				published[m.key], inLedger[m.key] = shown, owned
			}
			// Read after status: what status said Published then is in the
			// table now, nothing having changed since.
			stored, _, err := storedTable(ctx, tableNs)
			Expect(err).NotTo(HaveOccurred(), "%s: the stored table", where)
			inTable := map[string]spec.TableTool{}
			for _, t := range stored.Tools {
				inTable[t.Name] = t
			}
			var out []string
			for _, m := range toolSets {
				for name, pub := range published[m.key] {
					t, ok := inTable[name]
					has := ok && t.ToolSet.Namespace == m.key.Namespace && t.ToolSet.Name == m.key.Name &&
						ownership.SameObject(types.UID(t.ToolSetUID), m.uid)
					if pub && !has {
						out = append(out, fmt.Sprintf("%s: %s of %s is Published, but the stored table lacks it", where, name, m.key))
					}
					if settled && (pub != has || has != inLedger[m.key][name]) {
						out = append(out, fmt.Sprintf("%s: %s of %s: Published %v, in the stored table %v, in the ledger %v",
							where, name, m.key, pub, has, inLedger[m.key][name]))
					}
				}
			}
			if !settled {
				return out
			}
			// And the other way: every entry of the stored table and every
			// record of the ledger is a claim Published in status, of the
			// object that exists now.
			publishedBy := func(owner types.NamespacedName, uid types.UID, name string) bool {
				i := slices.IndexFunc(toolSets, func(m *modelToolSet) bool { return m.key == owner })
				return i >= 0 && toolSets[i].exists && ownership.SameObject(uid, toolSets[i].uid) && published[owner][name]
			}
			for name, t := range inTable {
				if owner := (types.NamespacedName{Namespace: t.ToolSet.Namespace, Name: t.ToolSet.Name}); !publishedBy(owner, types.UID(t.ToolSetUID), name) {
					out = append(out, fmt.Sprintf("%s: the stored table has %s of %s (UID %s), which status does not show Published", where, name, owner, t.ToolSetUID))
				}
			}
			for name, rec := range ledger {
				if !publishedBy(rec.Owner, rec.UID, name) {
					out = append(out, fmt.Sprintf("%s: the ledger records %s for %s (UID %s), which status does not show Published", where, name, rec.Owner, rec.UID))
				}
			}
			return out
		}
		// settle waits until the table, as the watch shows it, holds the
		// model's owners, then protects them.
		settle := func(where string) {
			GinkgoHelper()
			want := map[string]string{}
			for name, owner := range owners {
				want[name] = owner.String()
			}
			Eventually(func(g Gomega) map[string]string {
				t := watcher.Latest()
				g.Expect(t).NotTo(BeNil())
				got := map[string]string{}
				for name, ref := range harness.Names(t) {
					got[name] = ref.String()
				}
				return got
			}).Should(Equal(want), "%s: the published owners", where)
			mu.Lock()
			maps.Copy(protected, owners)
			mu.Unlock()
			// Status (what the reconciler writes) ⇔ the table readers see,
			// decoded from its ConfigMaps, once the write came back to the
			// publisher ⇔ the ledger, for every claim of every ToolSet.
			Eventually(func() []string { return statusAgainstTable(where, true) }).Should(BeEmpty(),
				"%s: status, the stored table and the ledger", where)
		}
		randomTools := func() []string {
			var out []string
			for _, t := range baseTools {
				if rng.IntN(2) == 0 {
					out = append(out, t)
				}
			}
			return out
		}

		p, stop = start()
		Expect(p.SetPolicies(ctx, policySets[policy])).To(Succeed())
		settle("start")

		// change makes one random change to the cluster and the model. It
		// unprotects what the change lets go of before making it.
		change := func(where string) (string, *modelToolSet) {
			GinkgoHelper()
			for {
				m := toolSets[rng.IntN(len(toolSets))]
				switch op := rng.IntN(8); {
				case op == 0 && !m.exists:
					ts := minimalToolSet(m.key.Namespace, m.key.Name)
					Expect(k8sClient.Create(ctx, ts)).To(Succeed())
					m.exists, m.created, m.uid, m.serving, m.prefix, m.tools = true, ts.CreationTimestamp.Time, ts.UID, true, "", randomTools()
					return "create", m
				case op == 7 && m.exists:
					// kubectl replace --force: the new object offers before
					// any Withdraw of the old one.
					unprotect(func(_ string, owner types.NamespacedName) bool { return owner == m.key })
					Expect(k8sClient.Delete(ctx, minimalToolSet(m.key.Namespace, m.key.Name))).To(Succeed())
					Eventually(func() error {
						return k8sClient.Get(ctx, m.key, &v1alpha1.ToolSet{})
					}).Should(MatchError(ContainSubstring("not found")))
					ts := minimalToolSet(m.key.Namespace, m.key.Name)
					Expect(k8sClient.Create(ctx, ts)).To(Succeed())
					// A withdraw, then a new claim: the old object's names
					// go by the rule before the new one claims any (on a tie
					// of creation seconds, a rival takes them first).
					m.exists = false
					owners = reference(owners)
					m.exists, m.created, m.uid, m.serving, m.tools = true, ts.CreationTimestamp.Time, ts.UID, true, randomTools()
					return "recreate", m
				case op == 1 && m.exists:
					unprotect(func(_ string, owner types.NamespacedName) bool { return owner == m.key })
					Expect(k8sClient.Delete(ctx, minimalToolSet(m.key.Namespace, m.key.Name))).To(Succeed())
					m.exists = false
					return "delete", m
				case op == 2 && m.exists:
					kept := m.prefix
					if rng.IntN(2) == 0 {
						m.prefix = map[string]string{"": "x_", "x_": ""}[m.prefix]
					}
					m.tools = randomTools()
					unprotect(func(name string, owner types.NamespacedName) bool {
						if owner != m.key {
							return false
						}
						return kept != m.prefix || !slices.Contains(m.tools, strings.TrimPrefix(name, kept))
					})
					if kept != m.prefix {
						return "prefix", m
					}
					return "tools", m
				case op == 3 && m.exists && m.serving:
					unprotect(func(_ string, owner types.NamespacedName) bool { return owner == m.key })
					m.serving = false
					return "unready", m
				case op == 4 && m.exists && !m.serving:
					m.serving = true
					return "ready", m
				case op == 5:
					next := (policy + 1 + rng.IntN(len(policySets)-1)) % len(policySets)
					rule, err := ownership.NewRule(policySets[next])
					Expect(err).NotTo(HaveOccurred())
					unprotect(func(name string, owner types.NamespacedName) bool {
						_, ok := rule.Permits(owner.Namespace, name)
						return !ok
					})
					policy = next
					return "policy", nil
				case op == 6:
					return "restart", nil
				}
			}
		}
		// apply tells the publisher of a change.
		apply := func(op string, m *modelToolSet) map[string]ownership.Verdict {
			GinkgoHelper()
			switch op {
			case "delete":
				Expect(p.Withdraw(ctx, m.key)).To(Succeed())
			case "policy":
				Expect(p.SetPolicies(ctx, policySets[policy])).To(Succeed())
			default:
				return offer(p, m)
			}
			return nil
		}
		// restart stops the publisher and starts a new one that reads the
		// table back; every ToolSet that exists is then heard from in a
		// random order, the policies at a random point among them.
		restart := func(where string, failover bool) {
			GinkgoHelper()
			stop()
			if failover {
				// Cut off, the old leader still never said Published ahead
				// of the table.
				if bad := statusAgainstTable(where+" cut off", false); len(bad) > 0 {
					mu.Lock()
					invariantViolations = append(invariantViolations, bad...)
					mu.Unlock()
				}
			}
			stored, _, err := storedTable(ctx, tableNs)
			Expect(err).NotTo(HaveOccurred(), "the table reads back whole")
			durable := map[string]types.NamespacedName{}
			for _, t := range stored.Tools {
				key := types.NamespacedName{Namespace: t.ToolSet.Namespace, Name: t.ToolSet.Name}
				if i := slices.IndexFunc(toolSets, func(m *modelToolSet) bool { return m.key == key }); i >= 0 &&
					t.ToolSetUID != "" && types.UID(t.ToolSetUID) != toolSets[i].uid {
					// Written by an object since deleted and created again:
					// not the owner any more.
					continue
				}
				durable[t.Name] = key
			}
			if !maps.Equal(durable, owners) {
				counts["unwritten changes at a failover"]++
			}
			// Sometimes the admin changes the budget with the restart: the
			// names it takes from their owners are let go.
			changedBudget := rng.IntN(4) == 0
			if changedBudget {
				counts["budget change"]++
				budget = budgets[(slices.Index(budgets, budget)+1+rng.IntN(len(budgets)-1))%len(budgets)]
				GinkgoWriter.Printf("model test: %s: budget %+v\n", where, budget)
			}
			// The outcome follows from what was written and the claims.
			owners = reference(durable)
			if changedBudget {
				unprotect(func(name string, owner types.NamespacedName) bool { return owners[name] != owner })
			}

			p, stop = start()
			var heard []*modelToolSet
			for _, m := range toolSets {
				if m.exists {
					heard = append(heard, m)
				}
			}
			rng.Shuffle(len(heard), func(i, j int) { heard[i], heard[j] = heard[j], heard[i] })
			at := rng.IntN(len(heard) + 1)
			for i, m := range heard {
				if i == at {
					Expect(p.SetPolicies(ctx, policySets[policy])).To(Succeed())
				}
				offer(p, m)
			}
			if at == len(heard) {
				Expect(p.SetPolicies(ctx, policySets[policy])).To(Succeed())
			}
		}

		for step := range steps {
			where := fmt.Sprintf("seed %d step %d", seed, step)
			op, m := change(where)
			switch {
			case op == "restart" && rng.IntN(2) == 0:
				// A clean stop after the table was written.
				counts["restart"]++
				restart(where+" restart", false)
			case op == "restart":
				// A failover: the leader is cut off right after a change it
				// may not have written.
				counts["failover"]++
				op, m = change(where)
				for op == "restart" {
					op, m = change(where)
				}
				counts[op]++
				// Cut off after a few writes (none to three: the ledger's
				// chunks go before the table's ConfigMaps), so that the
				// change is written whole, in part or not at all.
				cut.allow.Store(int64(rng.IntN(4)))
				apply(op, m)
				owners = reference(owners)
				restart(where+" failover after "+op, true)
			default:
				counts[op]++
				verdicts := apply(op, m)
				// Before the write as after: status never says Published
				// ahead of the table.
				if bad := statusAgainstTable(where+" "+op, false); len(bad) > 0 {
					mu.Lock()
					invariantViolations = append(invariantViolations, bad...)
					mu.Unlock()
				}
				owners = reference(owners)
				if verdicts != nil {
					checkVerdicts(m, verdicts, where+" "+op)
				}
			}
			settle(where + " " + op)
		}
		stop()

		versions, torn := watcher.Observed()
		Expect(watcher.Err()).NotTo(HaveOccurred())
		mu.Lock()
		defer mu.Unlock()
		Expect(violations).To(BeEmpty(), "table versions that lacked a served tool")
		Expect(invariantViolations).To(BeEmpty(), "claims Published in status ahead of the table")
		// A long run exercised every change and fault it claims to: the
		// budgets bound, a failover left changes unwritten.
		if steps >= 500 {
			for _, what := range []string{"create", "delete", "recreate", "tools", "prefix", "unready", "ready", "policy",
				"restart", "failover", "unwritten changes at a failover", "budget change", "over budget"} {
				Expect(counts).To(HaveKeyWithValue(what, BeNumerically(">", 0)), "%d steps never made %q", steps, what)
			}
		}
		summary := fmt.Sprintf("model test: seed %d, %d steps, budget %+v, %d table versions (%d torn reads), %d invariant violations; operations and faults: %v",
			seed, steps, budget, versions, torn, len(invariantViolations), counts)
		GinkgoWriter.Println(summary)
		AddReportEntry("model summary", summary, ReportEntryVisibilityAlways)
	})
})
