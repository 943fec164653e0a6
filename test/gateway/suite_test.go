// Package gateway runs the gateway binary end to end: a real kube-apiserver
// and etcd (envtest), the manager binary publishing the tool table, toolkit
// workloads on loopback behind Pods and ToolSets, and MCP clients of both
// protocol eras (the Go SDK's and the TypeScript SDK's) talking to the
// gateway over HTTP. With --auth=kubernetes it checks real ServiceAccount
// tokens, Roles and RoleBindings on the same API server.
package gateway

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
	tableNamespace = "toolplane-system"
	tableName      = "toolplane-tools"
	// callTimeout is the gateway's --call-timeout.
	callTimeout = 3 * time.Second
	// settle bounds how long the table, a status or the gateway may take
	// to show something on a busy machine.
	settle = 90 * time.Second
	// tokenAudience is the audience the authenticating gateway wants.
	tokenAudience = "toolplane-gateway"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	workDir    string
	cp         *harness.ControlPlane
	mgr        *harness.Manager
	gw, gwAuth *harness.Gateway
	gatewayBin string
	wls        = map[string]*workload{}
)

func TestGateway(t *testing.T) {
	RegisterFailHandler(Fail)
	specreport.RunSpecs(t, "Gateway Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	workDir, err = os.MkdirTemp("", "gateway-e2e-")
	Expect(err).NotTo(HaveOccurred())

	By("starting the control plane")
	cp, err = harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), workDir)
	Expect(err).NotTo(HaveOccurred())
	for _, ns := range []string{tableNamespace, "crm", "weather", "late", "owners", "faulty", "agents", "big-table"} {
		Expect(cp.CreateNamespace(ctx, ns)).To(Succeed())
	}

	By("building the manager and the gateway")
	mgrBin, err := harness.Build(ctx, filepath.Join("..", ".."), workDir, "manager")
	Expect(err).NotTo(HaveOccurred())
	gatewayBin, err = harness.Build(ctx, filepath.Join("..", ".."), workDir, "gateway")
	Expect(err).NotTo(HaveOccurred())

	By("starting every workload, so that the gateways can be told their addresses")
	for _, w := range []*workload{
		newWorkload("crm", "crm-tools", "crm_", echoTool("crm"), headerTool("headers")),
		newWorkload("weather", "weather-tools", "", forecastTool()),
		newWorkload("late", "late-tools", "", lateTool()),
		newWorkload("owners", "owner-a", "", sharedTool("a")),
		newWorkload("owners", "owner-b", "", sharedTool("b")),
		newWorkload("faulty", "slow-tools", "", hangTool()),
		newWorkload("faulty", "dead-tools", "", deadTool()),
	} {
		wls[w.service] = w
	}
	resolve := map[string]string{}
	for _, w := range wls {
		resolve[w.host()] = w.addr()
	}

	By("starting the manager")
	mgr = &harness.Manager{Bin: mgrBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace,
		LogPath: filepath.Join(workDir, "manager.log")}
	Expect(mgr.Start(ctx)).To(Succeed())

	By("publishing the first ToolSets")
	for _, name := range []string{"crm-tools", "weather-tools", "owner-a", "slow-tools", "dead-tools"} {
		wls[name].apply(ctx)
	}
	waitForTable(func(names map[string]string) bool {
		return len(names) == 6
	})

	By("starting the gateways: one open, one that authenticates callers")
	gw = &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: resolve,
		Args: []string{"--call-timeout", callTimeout.String()}, LogPath: filepath.Join(workDir, "gateway.log")}
	Expect(gw.Start(ctx)).To(Succeed())
	gwAuth = &harness.Gateway{Bin: gatewayBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: resolve,
		Args:    []string{"--auth=kubernetes", "--token-audience", tokenAudience, "--auth-cache-ttl", "1s"},
		LogPath: filepath.Join(workDir, "gateway-auth.log")}
	Expect(gwAuth.Start(ctx)).To(Succeed())
})

var _ = AfterSuite(func() {
	for _, g := range []*harness.Gateway{gw, gwAuth} {
		if g != nil {
			Expect(g.Stop(30*time.Second)).To(Succeed(), "the gateway must stop cleanly on SIGTERM")
		}
	}
	if mgr != nil {
		Expect(mgr.Stop(30 * time.Second)).To(Succeed())
	}
	for _, w := range wls {
		w.close()
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
		fmt.Fprintf(GinkgoWriter, "manager and gateway logs kept in %s\n", workDir)
	}
})
