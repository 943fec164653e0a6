// Command demo runs toolplane on an embedded control plane: a real
// kube-apiserver and etcd (built by `make envtest`), the CRDs, and the
// manager binary. It needs no cluster.
//
// By default it runs to completion and exits 0; --wait keeps everything up
// for exploration with kubectl until it is interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

func main() {
	binDir := flag.String("bin", "bin", "The directory holding the manager binary.")
	wait := flag.Bool("wait", false, "Keep the control plane and the manager running until interrupted, for kubectl.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *binDir, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, binDir string, wait bool) (retErr error) {
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	step("Starting the embedded control plane (kube-apiserver and etcd from %s)", os.Getenv("KUBEBUILDER_ASSETS"))
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		step("Stopping the control plane")
		retErr = errors.Join(retErr, env.Stop())
	}()

	user, err := env.AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return fmt.Errorf("adding the demo user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	workDir := filepath.Join(binDir, "demo")
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "toolplane-system"}}); err != nil {
		return fmt.Errorf("creating namespace toolplane-system: %w", err)
	}

	probeAddr, err := freeAddr()
	if err != nil {
		return err
	}
	step("Starting the manager (%s)", filepath.Join(binDir, "manager"))
	mgr := exec.Command(filepath.Join(binDir, "manager"),
		"--kubeconfig", kubeconfigPath,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", probeAddr,
		"--table-namespace", "toolplane-system")
	logFile, err := os.Create(filepath.Join(workDir, "manager.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	mgr.Stdout, mgr.Stderr = logFile, logFile
	if err := mgr.Start(); err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- mgr.Wait() }()
	defer func() {
		step("Stopping the manager (SIGTERM)")
		_ = mgr.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("the manager exited: %w (log: %s)", err, logFile.Name()))
			}
		case <-time.After(30 * time.Second):
			_ = mgr.Process.Kill()
			retErr = errors.Join(retErr, errors.New("the manager did not stop within 30s of SIGTERM"))
		}
	}()

	if err := waitReady(ctx, "http://"+probeAddr+"/readyz", exited); err != nil {
		return fmt.Errorf("waiting for the manager: %w (log: %s)", err, logFile.Name())
	}
	step("The manager is ready (log: %s)", logFile.Name())

	if !wait {
		return nil
	}
	fmt.Printf("\nEverything is up. In another terminal:\n  export KUBECONFIG=%s\n  kubectl get toolsets -A\nPress Ctrl-C to stop.\n", kubeconfigPath)
	select {
	case <-ctx.Done():
		return nil
	case err := <-exited:
		return fmt.Errorf("the manager exited: %w", err)
	}
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(ctx context.Context, url string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("the manager exited early: %w", err)
		case <-tick.C:
		}
	}
}
