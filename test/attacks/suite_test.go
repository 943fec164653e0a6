// Package attacks runs the real binaries (the manager, the gateway and
// example-tools, each in a process of its own) against one small hostile
// input at a time: one request, many idle clients, one tenant, one
// workload. Each spec is named for its attack and checks the bound that
// holds against it: the attacked process's peak RSS, read from /proc, stays
// within its bound, and it answers a well-behaved client within that
// client's timeout during the attack and after it.
//
// Attackers dial from loopback addresses of their own (127.0.x.y, see
// [harness.LoopbackIP]); the well-behaved client dials from 127.0.0.1, as a
// different machine would.
//
// The cheap specs run in `make test`; those labelled "heavy" run in
// `make test-attacks` (`-ginkgo.label-filter=heavy`), which CI runs too.
//
// Files: gateway_test.go (the gateway's attacks), operator_test.go,
// toolkit_test.go and routing_test.go (the manager's, a workload's and
// routing's); shared helpers in helpers_test.go and test/harness.
package attacks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/test/specreport"
)

const (
	// tableNamespace and tableName are where the manager publishes.
	tableNamespace = "toolplane-system"
	tableName      = "toolplane-tools"
	// settle bounds how long the table, a status or a process may take to
	// show something on a busy machine.
	settle = 60 * time.Second
)

// The chart's limits, which the bounds are checked against.
const (
	// gatewayRSSBound is the gateway's peak RSS allowed under any attack:
	// the chart's limit (gateway.resources.limits.memory, 256Mi) with
	// headroom.
	gatewayRSSBound = 200 << 20
	// chartGoMemLimit is the GOMEMLIMIT the chart sets for a 256Mi limit at
	// its goMemLimitPercent of 65.
	chartGoMemLimit = "GOMEMLIMIT=174483046"
)

var (
	ctx     context.Context
	cancel  context.CancelFunc
	workDir string
	cp      *harness.ControlPlane
	// mgr is the manager, publishing into tableNamespace; specs that need a
	// manager of their own start one with managerBin.
	mgr *harness.Manager
	// The binaries, built once.
	managerBin, gatewayBin, exampleToolsBin string
)

func TestAttacks(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	// `go test ./...` runs the cheap attacks; `make test-attacks` passes
	// -ginkgo.label-filter=heavy for the rest.
	if suiteConfig.LabelFilter == "" {
		suiteConfig.LabelFilter = "!heavy"
	}
	specreport.RunSpecs(t, "Attacks Suite", suiteConfig, reporterConfig)
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	workDir, err = os.MkdirTemp("", "attacks-")
	Expect(err).NotTo(HaveOccurred())

	By("starting the control plane")
	cp, err = harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), workDir)
	Expect(err).NotTo(HaveOccurred())
	Expect(cp.CreateNamespace(ctx, tableNamespace)).To(Succeed())

	By("building the manager, the gateway and example-tools")
	root := filepath.Join("..", "..")
	managerBin, err = harness.Build(ctx, root, workDir, "manager")
	Expect(err).NotTo(HaveOccurred())
	gatewayBin, err = harness.Build(ctx, root, workDir, "gateway")
	Expect(err).NotTo(HaveOccurred())
	// ATTACKS_GATEWAY_BIN runs the gateway's attacks against another build,
	// such as one of an older commit, to see a bound that it lacks fail.
	if bin := os.Getenv("ATTACKS_GATEWAY_BIN"); bin != "" {
		gatewayBin = bin
	}
	exampleToolsBin, err = harness.Build(ctx, root, workDir, "example-tools")
	Expect(err).NotTo(HaveOccurred())

	By("starting the manager")
	mgr = &harness.Manager{Bin: managerBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
		Env: []string{chartGoMemLimit}, LogPath: filepath.Join(workDir, "manager.log")}
	Expect(mgr.Start(ctx)).To(Succeed())
})

var _ = AfterSuite(func() {
	if mgr != nil {
		Expect(mgr.Stop(30 * time.Second)).To(Succeed())
	}
	if cancel != nil {
		cancel()
	}
	if cp != nil {
		Expect(cp.Stop()).To(Succeed())
	}
})

var _ = ReportAfterSuite("logs", func(r Report) {
	switch {
	case workDir == "":
	case r.SuiteSucceeded:
		_ = os.RemoveAll(workDir)
	default:
		fmt.Fprintf(GinkgoWriter, "logs kept in %s\n", workDir)
	}
})
