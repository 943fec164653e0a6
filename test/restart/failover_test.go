package restart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// lease is the failover spec's lease duration: short, so that a standby
// takes over soon after the leader dies.
const lease = 4 * time.Second

var _ = Describe("Two replicas with leader election", Ordered, func() {
	var (
		ctx      context.Context
		cp       *harness.ControlPlane
		replicas [2]*harness.Manager
		table    *harness.TableWatcher
		required harness.Required
		f        *fleet
	)

	owner := func(name string) spec.ObjectReference {
		return spec.ObjectReference{Namespace: namespace, Name: name}
	}

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

	// published waits until the table publishes each tool for the owner
	// given, then requires it in every later version.
	published := func(timeout time.Duration, want map[string]string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			t := table.Latest()
			g.Expect(t).NotTo(BeNil())
			got := harness.Names(t)
			for tool, name := range want {
				g.Expect(got).To(HaveKeyWithValue(tool, owner(name)), "tool %s of %s", tool, name)
			}
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		for tool, name := range want {
			required.Add(owner(name), tool)
		}
	}

	// leader returns the replica that leads, once exactly one does.
	leader := func(timeout time.Duration) int {
		GinkgoHelper()
		var lead int
		Eventually(func(g Gomega) {
			lead = -1
			for i, m := range replicas {
				if m.Pid() == 0 {
					continue
				}
				leading, err := m.Leading(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				if leading {
					g.Expect(lead).To(Equal(-1), "both replicas lead")
					lead = i
				}
			}
			g.Expect(lead).NotTo(Equal(-1), "no replica leads")
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		return lead
	}

	BeforeAll(func() {
		ctx = context.Background()
		workDir, err := os.MkdirTemp("", "failover-")
		Expect(err).NotTo(HaveOccurred())
		cp, err = harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), workDir)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(cp.Stop()).To(Succeed())
			if !CurrentSpecReport().Failed() {
				_ = os.RemoveAll(workDir)
			} else {
				fmt.Fprintf(GinkgoWriter, "manager logs kept in %s\n", workDir)
			}
		})
		Expect(cp.CreateNamespace(ctx, tableNamespace)).To(Succeed())
		Expect(cp.CreateNamespace(ctx, namespace)).To(Succeed())

		bin, err := harness.BuildManager(ctx, filepath.Join("..", ".."), workDir)
		Expect(err).NotTo(HaveOccurred())
		for i := range replicas {
			replicas[i] = &harness.Manager{
				Bin: bin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
				Args: []string{
					"--leader-elect",
					"--leader-elect-lease-duration=" + lease.String(),
					"--leader-elect-renew-deadline=3s",
					"--leader-elect-retry-period=500ms",
				},
				LogPath: filepath.Join(workDir, fmt.Sprintf("manager-%d.log", i)),
			}
			m := replicas[i]
			DeferCleanup(func() { m.Kill() })
		}

		wctx, stopWatching := context.WithCancel(ctx)
		DeferCleanup(stopWatching)
		table, err = harness.WatchTable(wctx, cp, tableNamespace, tableName, required.Check)
		Expect(err).NotTo(HaveOccurred())

		mux := http.NewServeMux()
		srv := httptest.NewServer(mux)
		DeferCleanup(srv.Close)
		f = &fleet{mux: mux, port: srv.Listener.Addr().(*net.TCPAddr).Port, tools: map[string][]string{}, pods: map[string][]string{}}
	})

	It("hands over to the standby within the lease when the leader is killed mid-churn, losing no tool and moving no owner", func() {
		By("starting two replicas")
		for _, m := range replicas {
			Expect(m.Start(ctx)).To(Succeed())
		}
		first := leader(2 * time.Minute)

		By("deploying stable ToolSets and two that claim the same name, the first one first")
		for i := range 3 {
			deploy(fmt.Sprintf("stable-%d", i), fmt.Sprintf("stable%d_a", i), fmt.Sprintf("stable%d_b", i))
		}
		deploy("claim-first", "contested", "first_only")
		published(settle, map[string]string{"contested": "claim-first", "first_only": "claim-first"})
		deploy("claim-second", "contested", "second_only")
		published(settle, map[string]string{
			"second_only": "claim-second",
			"stable0_a":   "stable-0", "stable0_b": "stable-0",
			"stable1_a": "stable-1", "stable1_b": "stable-1",
			"stable2_a": "stable-2", "stable2_b": "stable-2",
		})

		stopRolling := f.rollInBackground(ctx, cp, "stable-0", "stable-1", "stable-2")
		lead := first
		for round := range 2 {
			By(fmt.Sprintf("round %d: killing the leader, replica %d, while ToolSets churn", round+1, lead))
			name := fmt.Sprintf("churn-%d", round)
			deploy(name, fmt.Sprintf("churn%d_a", round))
			replicas[lead].Kill()
			killed := lead

			By(fmt.Sprintf("round %d: the standby takes over within the lease and a few seconds", round+1))
			// Generous: the standby retries every 500ms once the lease
			// has run out, on a machine that may be loaded.
			lead = leader(lease + 30*time.Second)
			Expect(lead).NotTo(Equal(killed))
			published(lease+60*time.Second, map[string]string{fmt.Sprintf("churn%d_a", round): name})

			By(fmt.Sprintf("round %d: starting the killed replica again, as a standby", round+1))
			Expect(replicas[killed].Start(ctx)).To(Succeed())
			Consistently(func() (bool, error) { return replicas[killed].Leading(ctx) }).
				WithTimeout(time.Second).Should(BeFalse())
		}

		By("letting the owner of the contested name go: the earliest remaining claimant takes it")
		f.remove(ctx, cp, "claim-first", &required)
		published(settle, map[string]string{"contested": "claim-second"})

		rolled, err := stopRolling()
		Expect(err).NotTo(HaveOccurred())
		versions, torn := table.Observed()
		By(fmt.Sprintf("the table watch saw %d versions (%d torn) across 2 failovers and %d Pod rollouts", versions, torn, rolled))
		Expect(table.Err()).NotTo(HaveOccurred())
		Expect(required.Lost()).To(BeEmpty())
		Expect(torn).To(BeZero(), "every version the watch showed read back whole")
	})
})
