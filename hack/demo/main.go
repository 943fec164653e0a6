// Command demo runs toolplane's whole loop on an embedded control plane, with
// no cluster: a real kube-apiserver and etcd (built by `make envtest`), the
// CRDs, the manager binary, and three example-tools workloads on loopback
// behind Pods, Services and ToolSets in two namespaces, one of them with a
// prefix and two of them exposing get_weather. It waits for the tool table,
// prints it with the conflict as the losing ToolSet's status shows it, and
// then acts as an agent: it loads the table through toolkit/discovery and
// calls tools with the sloppy arguments a model sends. Last it starts the
// gateway binary, and an MCP agent lists every tool through it and calls one.
//
// By default it runs to completion and exits 0; --wait keeps everything up
// for exploration with kubectl until it is interrupted. Every child process
// runs in a process group of its own and is stopped with SIGTERM when the
// demo ends, is interrupted (Ctrl-C) or is sent SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/test/harness"
)

// The tool table the manager publishes, as in a default install.
const (
	tableNamespace = "toolplane-system"
	tableName      = "toolplane-tools"
)

// stopTimeout bounds the wait for each child process after SIGTERM.
const stopTimeout = 30 * time.Second

// options are the demo's inputs.
type options struct {
	// binDir holds the manager, gateway and example-tools binaries.
	binDir string
	// workDir receives the kubeconfig, the logs and the agent's copy of the
	// table.
	workDir string
	// crdDir holds the CRDs to install.
	crdDir string
	// wait keeps everything up until ctx is done.
	wait bool
	// timeout bounds the wait for the table to settle.
	timeout time.Duration
	// out receives the demo's report.
	out io.Writer
}

func main() {
	o := options{out: os.Stdout}
	flag.StringVar(&o.binDir, "bin", "bin", "The directory holding the manager, gateway and example-tools binaries.")
	flag.StringVar(&o.workDir, "workdir", "", "Where the kubeconfig, the logs and the agent's copy of the table go (default <bin>/demo).")
	flag.StringVar(&o.crdDir, "crds", filepath.Join("config", "crd", "bases"), "The directory holding the CRDs.")
	flag.BoolVar(&o.wait, "wait", false, "Keep the control plane, the manager and the workloads running until interrupted, for kubectl.")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long to wait for the tool table to settle.")
	flag.Parse()
	if o.workDir == "" {
		o.workDir = filepath.Join(o.binDir, "demo")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Interrupted before it was up: everything it started is
			// stopped, and the cause is no failure of the demo's.
			fmt.Fprintln(os.Stderr, "demo: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// run runs the demo. Whatever it started is stopped before it returns, and
// a child process that does not stop cleanly is an error.
func run(ctx context.Context, o options) (retErr error) {
	binDir, err := filepath.Abs(o.binDir)
	if err != nil {
		return err
	}
	workDir, err := filepath.Abs(o.workDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	r := &report{w: o.out}

	r.step("Starting the embedded control plane (kube-apiserver and etcd from %s)", os.Getenv("KUBEBUILDER_ASSETS"))
	cp, err := harness.StartControlPlane(o.crdDir, workDir)
	if err != nil {
		return err
	}
	defer func() {
		r.step("Stopping the control plane")
		retErr = errors.Join(retErr, cp.Stop())
	}()
	for _, ns := range []string{tableNamespace, "crm", "weather"} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}

	wls := demoWorkloads()
	for _, wl := range wls {
		r.step("Starting workload %s/%s: example-tools --only %s", wl.namespace, wl.name, wl.onlyFlag())
		if err := wl.start(ctx, filepath.Join(binDir, "example-tools"), workDir); err != nil {
			return err
		}
		defer func() { retErr = errors.Join(retErr, wl.proc.Stop(stopTimeout)) }()
	}

	r.step("Starting the manager (%s)", filepath.Join(binDir, "manager"))
	mgr := &harness.Manager{
		Bin:            filepath.Join(binDir, "manager"),
		Kubeconfig:     cp.Kubeconfig,
		TableNamespace: tableNamespace,
		Args:           []string{"--table-name", tableName},
		LogPath:        filepath.Join(workDir, "manager.log"),
	}
	if err := freshLog(mgr.LogPath); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	defer func() {
		r.step("Stopping the manager and the workloads (SIGTERM)")
		retErr = errors.Join(retErr, mgr.Stop(stopTimeout))
	}()
	r.step("The manager is ready (log: %s)", mgr.LogPath)

	settleCtx, cancel := context.WithTimeout(ctx, o.timeout)
	st, err := apply(settleCtx, cp.Client, wls, r)
	cancel()
	if err != nil {
		return fmt.Errorf("%w (manager log: %s)", err, mgr.LogPath)
	}
	r.table(st)

	if err := agent(ctx, st, wls, filepath.Join(workDir, "agent-tools"), r); err != nil {
		return err
	}
	if err := progress(ctx, st, wls, r); err != nil {
		return err
	}

	gw, err := startGateway(ctx, binDir, workDir, cp.Kubeconfig, wls, r)
	if err != nil {
		return err
	}
	defer func() {
		r.step("Stopping the gateway (SIGTERM)")
		retErr = errors.Join(retErr, gw.Stop(stopTimeout))
	}()
	if err := mcpAgent(ctx, gw, len(st.table.Tools), r); err != nil {
		return fmt.Errorf("%w (gateway log: %s)", err, gw.LogPath)
	}
	if err := searchAgent(ctx, gw, r); err != nil {
		return fmt.Errorf("%w (gateway log: %s)", err, gw.LogPath)
	}

	if !o.wait {
		r.step("Done")
		return nil
	}
	r.hints(cp.Kubeconfig, wls)
	exited := make(chan string, len(wls)+1)
	watch := func(name string, done <-chan struct{}) {
		go func() {
			<-done
			exited <- name
		}()
	}
	watch("the manager", mgr.Done())
	for _, wl := range wls {
		watch("workload "+wl.name, wl.proc.Done())
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(o.out)
		return nil
	case name := <-exited:
		return fmt.Errorf("%s exited", name)
	}
}

// apply creates the workloads' Pods, Services and ToolSets and waits until
// the table holds every tool they expose with the expected owner. The first
// workload goes first, and alone, so that it owns the names it shares with
// later ones: the first claimant of a name keeps it.
func apply(ctx context.Context, c client.Client, wls []*workload, r *report) (*settled, error) {
	var (
		st      *settled
		err     error
		applied int
	)
	for _, batch := range [][]*workload{wls[:1], wls[1:]} {
		for _, wl := range batch {
			r.step("Applying Pod, Service and ToolSet %s/%s", wl.namespace, wl.name)
			if err := wl.apply(ctx, c); err != nil {
				return nil, err
			}
		}
		applied += len(batch)
		r.step("Waiting for the tool table and the status of %d ToolSet(s)", applied)
		if st, err = waitSettled(ctx, c, wls[:applied]); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// freshLog removes the log of an earlier run: the harness appends.
func freshLog(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
