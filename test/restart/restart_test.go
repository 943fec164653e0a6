// Package restart stops and starts the real manager binary five times while
// ToolSets and Pods churn, and kills the leader of two replicas with leader
// election twice, and watches the tool table throughout: no version of it
// may lack a tool that the truth holds, and no name may change owner except
// by the rule.
package restart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/test/specreport"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const (
	tableNamespace = "toolplane-system"
	tableName      = "toolplane-tools"
	namespace      = "churn"
	// squatNamespace claims a name a ToolNamePolicy reserves for namespace.
	squatNamespace = "squat"
	interval       = 5 * time.Second
	restarts       = 5
	// settle bounds how long the table and statuses may take to show a
	// change, a new leader's wait for the lease included.
	settle = 60 * time.Second
)

func TestRestart(t *testing.T) {
	RegisterFailHandler(Fail)
	specreport.RunSpecs(t, "Restart Suite")
}

// fleet is the ToolSets of the test and the loopback workloads behind them.
type fleet struct {
	mux  *http.ServeMux
	port int
	// tools of each ToolSet by name.
	tools map[string][]string
	// pods of each ToolSet, oldest first.
	pods map[string][]string
	seq  int
}

var _ = Describe("The manager, restarted while ToolSets and Pods churn", Ordered, func() {
	var (
		ctx      context.Context
		cp       *harness.ControlPlane
		mgr      *harness.Manager
		table    *harness.TableWatcher
		required harness.Required
		f        *fleet
		workDir  string
	)

	owner := func(name string) spec.ObjectReference {
		return spec.ObjectReference{Namespace: namespace, Name: name}
	}

	// deploy creates a ToolSet named name serving tools, with one ready Pod.
	deploy := func(name string, tools ...string) {
		GinkgoHelper()
		var specs []spec.Tool
		for _, t := range tools {
			specs = append(specs, harness.Tools(t, 1)[0])
			specs[len(specs)-1].Name = t
		}
		path := "/" + name + spec.DefaultPath
		f.mux.Handle(path, harness.NewWorkload(name, specs))
		f.tools[name] = tools
		f.addPod(ctx, cp, name)
		Expect(cp.Client.Create(ctx, harness.NewToolSet(namespace, name, name, path, interval))).To(Succeed())
	}

	// waitPublished waits until the table publishes name's tools for it,
	// then requires them.
	waitPublished := func(names ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			t := table.Latest()
			g.Expect(t).NotTo(BeNil())
			got := harness.Names(t)
			for _, name := range names {
				for _, tool := range f.tools[name] {
					g.Expect(got).To(HaveKeyWithValue(tool, owner(name)), "tool %s of %s", tool, name)
				}
			}
		}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed())
		for _, name := range names {
			required.Add(owner(name), f.tools[name]...)
		}
	}

	expectConflictedTo := func(loser, winner, tool string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: loser}, ts)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionConflicted)).To(BeTrue())
			g.Expect(ts.Status.Tools).To(ContainElement(v1alpha1.ToolStatus{
				Name: tool, SourceName: tool, State: v1alpha1.ToolConflicted,
				Owner: namespace + "/" + winner, Reason: "the name is owned by ToolSet " + namespace + "/" + winner,
			}))
		}).WithTimeout(settle).Should(Succeed())
	}

	BeforeAll(func() {
		ctx = context.Background()
		var err error
		workDir, err = os.MkdirTemp("", "restart-")
		Expect(err).NotTo(HaveOccurred())
		cp, err = harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), workDir)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(cp.Stop()).To(Succeed())
			if !CurrentSpecReport().Failed() {
				_ = os.RemoveAll(workDir)
			} else {
				fmt.Fprintf(GinkgoWriter, "manager log kept at %s\n", filepath.Join(workDir, "manager.log"))
			}
		})
		Expect(cp.CreateNamespace(ctx, tableNamespace)).To(Succeed())
		Expect(cp.CreateNamespace(ctx, namespace)).To(Succeed())

		bin, err := harness.BuildManager(ctx, filepath.Join("..", ".."), workDir)
		Expect(err).NotTo(HaveOccurred())
		mgr = &harness.Manager{
			Bin: bin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
			Args: []string{"--leader-elect"}, LogPath: filepath.Join(workDir, "manager.log"),
		}
		Expect(mgr.Start(ctx)).To(Succeed())
		DeferCleanup(func() { Expect(mgr.Stop(30 * time.Second)).To(Succeed()) })

		wctx, stopWatching := context.WithCancel(ctx)
		DeferCleanup(stopWatching)
		table, err = harness.WatchTable(wctx, cp, tableNamespace, tableName, required.Check)
		Expect(err).NotTo(HaveOccurred())

		mux := http.NewServeMux()
		srv := httptest.NewServer(mux)
		DeferCleanup(srv.Close)
		f = &fleet{mux: mux, port: srv.Listener.Addr().(*net.TCPAddr).Port, tools: map[string][]string{}, pods: map[string][]string{}}
	})

	It("keeps every tool of the truth in every version of the table, and every owner", func() {
		By("reserving stable0_* for namespace churn with a ToolNamePolicy, and claiming stable0_a first from namespace squat")
		Expect(cp.CreateNamespace(ctx, squatNamespace)).To(Succeed())
		Expect(cp.Client.Create(ctx, &v1alpha1.ToolNamePolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "churn-stable0"},
			Spec:       v1alpha1.ToolNamePolicySpec{Names: []string{"stable0_*"}, Namespaces: []string{namespace}},
		})).To(Succeed())
		squatSpec := harness.Tools("stable0_a", 1)[0]
		squatSpec.Name = "stable0_a"
		squatPath := "/squatter" + spec.DefaultPath
		f.mux.Handle(squatPath, harness.NewWorkload("squatter", []spec.Tool{squatSpec}))
		_, err := harness.CreateReadyPod(ctx, cp.Client, squatNamespace, "squatter-0", "squatter", f.port)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Client.Create(ctx, harness.NewToolSet(squatNamespace, "squatter", "squatter", squatPath, interval))).To(Succeed())
		expectDenied := func() {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				ts := &v1alpha1.ToolSet{}
				g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: squatNamespace, Name: "squatter"}, ts)).To(Succeed())
				g.Expect(ts.Status.Tools).To(ContainElement(And(
					HaveField("Name", "stable0_a"), HaveField("State", v1alpha1.ToolDenied))))
			}).WithTimeout(settle).Should(Succeed())
		}
		expectDenied()

		By("deploying stable ToolSets and two that claim the same name, the first one first")
		for i := range 4 {
			deploy(fmt.Sprintf("stable-%d", i), fmt.Sprintf("stable%d_a", i), fmt.Sprintf("stable%d_b", i))
		}
		deploy("claim-first", "contested", "first_only")
		waitPublished("claim-first")
		deploy("claim-second", "contested", "second_only")
		waitPublished("stable-0", "stable-1", "stable-2", "stable-3")
		// claim-second publishes only the name no one else holds.
		Eventually(func(g Gomega) {
			g.Expect(harness.Names(table.Latest())).To(HaveKeyWithValue("second_only", owner("claim-second")))
		}).WithTimeout(settle).Should(Succeed())
		required.Add(owner("claim-second"), "second_only")
		expectConflictedTo("claim-second", "claim-first", "contested")

		By("rolling the stable ToolSets' Pods in the background throughout")
		stopRolling := f.rollInBackground(ctx, cp, "stable-0", "stable-1", "stable-2", "stable-3")

		churned := 0
		for round := range restarts {
			By(fmt.Sprintf("round %d: churning while the manager runs", round+1))
			name := fmt.Sprintf("churn-%d", round)
			deploy(name, fmt.Sprintf("churn%d_a", round))
			stable := fmt.Sprintf("stable-%d", round%4)
			f.replacePod(ctx, cp, stable)
			waitPublished(name)
			if round > 0 {
				old := fmt.Sprintf("churn-%d", round-1)
				f.remove(ctx, cp, old, &required)
			}

			By(fmt.Sprintf("round %d: stopping the manager", round+1))
			Expect(mgr.Stop(30 * time.Second)).To(Succeed())

			By(fmt.Sprintf("round %d: churning while it is down", round+1))
			down := fmt.Sprintf("down-%d", round)
			deploy(down, fmt.Sprintf("down%d_a", round))
			f.replacePod(ctx, cp, fmt.Sprintf("stable-%d", (round+1)%4))
			f.replacePod(ctx, cp, "claim-first")

			By(fmt.Sprintf("round %d: starting the manager again", round+1))
			Expect(mgr.Start(ctx)).To(Succeed())
			waitPublished(down, "claim-first", stable)
			expectConflictedTo("claim-second", "claim-first", "contested")
			f.remove(ctx, cp, down, &required)
			churned++
		}

		rolled, err := stopRolling()
		Expect(err).NotTo(HaveOccurred())
		Expect(rolled).To(BeNumerically(">", restarts))

		versions, torn := table.Observed()
		By(fmt.Sprintf("the table watch saw %d versions (%d torn reads between parts) across %d restarts and %d Pod rollouts", versions, torn, churned, rolled))
		Expect(versions).To(BeNumerically(">", restarts))
		Expect(table.Err()).NotTo(HaveOccurred())
		Expect(required.Lost()).To(BeEmpty())
		Expect(harness.Names(table.Latest())).To(HaveKeyWithValue("contested", owner("claim-first")))
		// The policy held through every restart: the squatter never owned
		// the reserved name (required.Check saw every version of the table).
		Expect(harness.Names(table.Latest())).To(HaveKeyWithValue("stable0_a", owner("stable-0")))
		expectDenied()
	})
})

// addPod creates another ready Pod for ToolSet name.
func (f *fleet) addPod(ctx context.Context, cp *harness.ControlPlane, name string) {
	GinkgoHelper()
	f.seq++
	pod := fmt.Sprintf("%s-%d", name, f.seq)
	_, err := harness.CreateReadyPod(ctx, cp.Client, namespace, pod, name, f.port)
	Expect(err).NotTo(HaveOccurred())
	f.pods[name] = append(f.pods[name], pod)
}

// replacePod rolls ToolSet name's Pod: the new one is ready before the old
// one goes, as a Deployment's rolling update does.
func (f *fleet) replacePod(ctx context.Context, cp *harness.ControlPlane, name string) {
	GinkgoHelper()
	f.addPod(ctx, cp, name)
	old := f.pods[name][0]
	f.pods[name] = f.pods[name][1:]
	Expect(cp.Client.Delete(ctx, &corev1.Pod{ObjectMeta: objectMeta(old)})).To(Succeed())
}

// remove deletes ToolSet name and its Pods; its tools stop being required
// first.
func (f *fleet) remove(ctx context.Context, cp *harness.ControlPlane, name string, required *harness.Required) {
	GinkgoHelper()
	required.Remove(f.tools[name]...)
	ts := &v1alpha1.ToolSet{}
	ts.Namespace, ts.Name = namespace, name
	Expect(cp.Client.Delete(ctx, ts)).To(Succeed())
	for _, p := range f.pods[name] {
		Expect(cp.Client.Delete(ctx, &corev1.Pod{ObjectMeta: objectMeta(p)})).To(Succeed())
	}
	delete(f.pods, name)
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// rollInBackground keeps replacing a Pod of each named ToolSet, one after
// another, each new Pod ready before the old one goes, until the returned
// stop is called; stop reports how many Pods were rolled.
func (f *fleet) rollInBackground(ctx context.Context, cp *harness.ControlPlane, names ...string) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var (
		rolled int
		err    error
	)
	go func() {
		defer close(done)
		last := map[string]string{}
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			name := names[i%len(names)]
			pod := fmt.Sprintf("%s-bg-%d", name, i)
			if _, err = harness.CreateReadyPod(ctx, cp.Client, namespace, pod, name, f.port); err != nil {
				break
			}
			if old, ok := last[name]; ok {
				if err = cp.Client.Delete(ctx, &corev1.Pod{ObjectMeta: objectMeta(old)}); err != nil {
					break
				}
			}
			last[name] = pod
			rolled++
		}
		if ctx.Err() != nil {
			err = nil
		}
	}()
	return func() (int, error) {
		cancel()
		<-done
		return rolled, err
	}
}
