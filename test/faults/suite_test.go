// Package faults runs the real manager binary against hostile workloads on
// loopback and checks, for each, that the manager stays up and within its
// memory bound, that healthy ToolSets keep being scraped on time and keep
// their tools in the table, and that the hostile ToolSet's status says
// precisely what is wrong.
//
// The hostile ToolSets are not removed between specs: by the last spec every
// kind of hostility is active at once.
package faults

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
	// interval is every ToolSet's spec.interval, the shortest allowed.
	interval = 5 * time.Second
	// hostileTimeout is the hostile ToolSets' spec.timeout: longer than
	// late, so that a healthy ToolSet that waited for a hostile one's scrape
	// is caught.
	hostileTimeout = 4 * time.Second
	// late is how far past its interval a healthy ToolSet's scrape may
	// come: the scrape itself, the work queue and a busy machine, but never
	// a hostile ToolSet's timeout.
	late = 3 * time.Second
	// memoryBound is the manager's peak RSS allowed, the bound that
	// `make bench-scale` holds with 1,000 ToolSets.
	memoryBound = 256 << 20
	// settle bounds how long a status or the table may take to show
	// something.
	settle = 30 * time.Second
)

var (
	ctx     context.Context
	cancel  context.CancelFunc
	workDir string
	cp      *harness.ControlPlane
	mgr     *harness.Manager
	table   *harness.TableWatcher
	fleet   []*healthySet

	// required holds the tools that, once seen in the table, must be in
	// every later version of it.
	required harness.Required
	closers  []func()
)

func TestFaults(t *testing.T) {
	RegisterFailHandler(Fail)
	specreport.RunSpecs(t, "Fault Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	workDir, err = os.MkdirTemp("", "faults-")
	Expect(err).NotTo(HaveOccurred())

	By("starting the control plane")
	cp, err = harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), workDir)
	Expect(err).NotTo(HaveOccurred())
	Expect(cp.CreateNamespace(ctx, tableNamespace)).To(Succeed())

	By("building and starting the manager with its production defaults")
	bin, err := harness.BuildManager(ctx, filepath.Join("..", ".."), workDir)
	Expect(err).NotTo(HaveOccurred())
	// Debug logs record every scrape, for the log that a failure keeps.
	mgr = &harness.Manager{Bin: bin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
		Args: []string{"--zap-log-level=debug"}, LogPath: filepath.Join(workDir, "manager.log")}
	Expect(mgr.Start(ctx)).To(Succeed())

	table, err = harness.WatchTable(ctx, cp, tableNamespace, tableName, required.Check)
	Expect(err).NotTo(HaveOccurred())

	By("deploying the healthy fleet")
	fleet = deployHealthyFleet(3)
	for _, h := range fleet {
		h.waitPublished()
	}
})

// atSuiteEnd runs fn after the last spec, when the manager has stopped.
func atSuiteEnd(fn func()) { closers = append(closers, fn) }

var _ = AfterSuite(func() {
	if mgr != nil {
		err := mgr.Stop(30 * time.Second)
		Expect(err).NotTo(HaveOccurred(), "the manager must stop cleanly on SIGTERM")
	}
	for _, fn := range closers {
		fn()
	}
	if cancel != nil {
		cancel()
	}
	if cp != nil {
		Expect(cp.Stop()).To(Succeed())
	}
})

var _ = ReportAfterSuite("manager log", func(r Report) {
	switch {
	case workDir == "":
	case r.SuiteSucceeded:
		_ = os.RemoveAll(workDir)
	default:
		fmt.Fprintf(GinkgoWriter, "manager log kept at %s\n", filepath.Join(workDir, "manager.log"))
	}
})

// healthySet is a well-behaved ToolSet and the workload behind it.
type healthySet struct {
	ts       *v1alpha1.ToolSet
	workload *harness.Workload
	tools    []string
}

func deployHealthyFleet(n int) []*healthySet {
	GinkgoHelper()
	ns := newNamespace("healthy")
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	DeferCleanup(srv.Close)
	port := portOf(srv.Listener.Addr())
	var out []*healthySet
	for i := range n {
		name := fmt.Sprintf("healthy-%d", i)
		tools := harness.Tools(fmt.Sprintf("healthy%d_", i), 3)
		h := &healthySet{workload: harness.NewWorkload(name, tools)}
		for _, t := range tools {
			h.tools = append(h.tools, t.Name)
		}
		path := "/" + name + spec.DefaultPath
		mux.Handle(path, h.workload)
		_, err := harness.CreateReadyPod(ctx, cp.Client, ns, name+"-0", name, port)
		Expect(err).NotTo(HaveOccurred())
		h.ts = harness.NewToolSet(ns, name, name, path, interval)
		Expect(cp.Client.Create(ctx, h.ts)).To(Succeed())
		out = append(out, h)
	}
	return out
}

// waitPublished waits for the set's tools in the table and requires them
// from then on.
func (h *healthySet) waitPublished() {
	GinkgoHelper()
	owner := spec.ObjectReference{Namespace: h.ts.Namespace, Name: h.ts.Name}
	Eventually(func(g Gomega) {
		t := table.Latest()
		g.Expect(t).NotTo(BeNil())
		names := harness.Names(t)
		for _, n := range h.tools {
			g.Expect(names).To(HaveKeyWithValue(n, owner))
		}
	}).WithTimeout(settle).Should(Succeed())
	required.Add(owner, h.tools...)
}

// expectUnharmed checks, over one and a half intervals, everything a hostile
// workload must not touch: the manager runs within its memory bound, every
// healthy ToolSet is Ready and scraped on time since the hostile one
// appeared, and no required tool ever left the table.
func expectUnharmed(since time.Time) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		exited, err := mgr.Exited()
		g.Expect(exited).To(BeFalse(), "the manager exited: %v (log: %s)", err, mgr.LogPath)
		ps, err := harness.ReadProcStats(mgr.Pid())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps.PeakRSS).To(BeNumerically("<=", memoryBound), "peak RSS %d MiB", ps.PeakRSS>>20)
		for _, h := range fleet {
			g.Expect(h.workload.LongestGap(since)).To(BeNumerically("<=", interval+late), "healthy ToolSet %s scraped late", h.ts.Name)
			ts := &v1alpha1.ToolSet{}
			g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(h.ts), ts)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue(), "healthy ToolSet %s not Ready: %v", ts.Name, ts.Status.Conditions)
		}
		g.Expect(table.Err()).NotTo(HaveOccurred())
		g.Expect(required.Lost()).To(BeEmpty())
	}).WithTimeout(interval * 3 / 2).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// hostile deploys a ToolSet whose one Pod is served at 127.0.0.1:port.
func hostile(name string, port int, path string, edit ...func(*v1alpha1.ToolSet)) *v1alpha1.ToolSet {
	GinkgoHelper()
	ns := newNamespace("hostile-" + name)
	_, err := harness.CreateReadyPod(ctx, cp.Client, ns, name+"-0", name, port)
	Expect(err).NotTo(HaveOccurred())
	ts := harness.NewToolSet(ns, name, name, path, interval)
	ts.Spec.Timeout = &metav1.Duration{Duration: hostileTimeout}
	for _, e := range edit {
		e(ts)
	}
	Expect(cp.Client.Create(ctx, ts)).To(Succeed())
	return ts
}

// eventuallyStatus waits until the ToolSet's status passes check.
func eventuallyStatus(ts *v1alpha1.ToolSet, check func(g Gomega, ts *v1alpha1.ToolSet)) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := &v1alpha1.ToolSet{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		check(g, got)
	}).WithTimeout(settle).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// expectScrapeFailed checks a ToolSet none of whose Pods could be scraped:
// Ready is False with reason ScrapeFailed and a message that names the Pod
// and holds every one of details.
func expectScrapeFailed(g Gomega, ts *v1alpha1.ToolSet, details ...string) {
	ready := apimeta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonScrapeFailed))
	g.Expect(ready.Message).To(ContainSubstring("pod " + ts.Name + "-0"))
	for _, d := range details {
		g.Expect(ready.Message).To(ContainSubstring(d))
	}
	g.Expect(ts.Status.Pods).To(Equal(v1alpha1.PodCounts{Selected: 1, Failed: 1}))
	g.Expect(ts.Status.PublishedTools).To(BeZero())
}

// toolState returns the state and reason of one tool in status.
func toolState(ts *v1alpha1.ToolSet, name string) (v1alpha1.ToolState, string) {
	for _, t := range ts.Status.Tools {
		if t.Name == name {
			return t.State, t.Reason
		}
	}
	return "", ""
}

var nsSeq int

func newNamespace(prefix string) string {
	GinkgoHelper()
	nsSeq++
	name := prefix + "-" + strconv.Itoa(nsSeq)
	name = strings.ToLower(name)
	Expect(cp.CreateNamespace(ctx, name)).To(Succeed())
	return name
}

func portOf(a net.Addr) int { return a.(*net.TCPAddr).Port }
