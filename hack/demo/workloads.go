package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// servicePort is the port of every workload's Service, as in a cluster; the
// agent's dialer maps <service>.<namespace>.svc.cluster.local:servicePort to the loopback
// port the workload really listens on.
const servicePort = 8080

// scrapeInterval is each ToolSet's spec.interval.
const scrapeInterval = 30 * time.Second

// workload is one example-tools process, standing in for the container of a
// Pod, and the ToolSet and Service that point at it. Its name is the Pod's
// app label, the Service's name, the ToolSet's name and the server name it
// reports.
type workload struct {
	namespace, name string
	// only are the tools it serves (example-tools --only).
	only []string
	// prefix is its ToolSet's spec.prefix.
	prefix string

	// addr is the loopback address it listens on, once started.
	addr string
	proc harness.Process
}

// demoWorkloads are the demo's three workloads. weather-tools goes first and
// owns get_weather; crm/assistant-tools serves it too and is shown the
// conflict, while crm/crm-tools publishes its tools under the crm_ prefix.
func demoWorkloads() []*workload {
	return []*workload{
		{namespace: "weather", name: "weather-tools", only: []string{"get_weather"}},
		{namespace: "crm", name: "crm-tools", prefix: "crm_",
			only: []string{"query_customer", "search_orders", "create_ticket", "evaluate_transaction_risk"}},
		{namespace: "crm", name: "assistant-tools",
			only: []string{"get_weather", "typed_echo", "add", "system_insight", "build_report"}},
	}
}

func (wl *workload) onlyFlag() string { return strings.Join(wl.only, ",") }

func (wl *workload) ref() spec.ObjectReference {
	return spec.ObjectReference{Namespace: wl.namespace, Name: wl.name}
}

// serviceHost is the host:port at which the table tells agents to reach the
// workload.
func (wl *workload) serviceHost() string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", wl.name, wl.namespace, servicePort)
}

// start runs example-tools on a free loopback port and waits until it serves
// its spec document.
func (wl *workload) start(ctx context.Context, bin, workDir string) error {
	addr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	wl.addr = addr
	// The agent dials loopback with the Service's name as Host, as a proxy
	// would, so the workload accepts any Host there.
	wl.proc = harness.Process{
		Name:    "workload " + wl.name,
		Bin:     bin,
		Args:    []string{"--addr", addr, "--only", wl.onlyFlag(), "--name", wl.name, "--allow-any-host-on-loopback"},
		LogPath: filepath.Join(workDir, wl.namespace+"-"+wl.name+".log"),
	}
	if err := freshLog(wl.proc.LogPath); err != nil {
		return err
	}
	return wl.proc.Start(ctx, "http://"+addr+spec.DefaultPath)
}

// apply creates the Pod (Running and Ready at 127.0.0.1, its container port
// the workload's loopback port), the Service and the ToolSet.
func (wl *workload) apply(ctx context.Context, c client.Client) error {
	_, p, err := net.SplitHostPort(wl.addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return err
	}
	if _, err := harness.CreateReadyPod(ctx, c, wl.namespace, wl.name+"-0", wl.name, port); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.namespace, Name: wl.name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": wl.name},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: servicePort, TargetPort: intstr.FromString(harness.PortName),
			}},
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating service %s/%s: %w", wl.namespace, wl.name, err)
	}
	ts := harness.NewToolSet(wl.namespace, wl.name, wl.name, spec.DefaultPath, scrapeInterval)
	ts.Spec.Service = &v1alpha1.ServiceReference{Name: wl.name, Port: servicePort}
	ts.Spec.Prefix = wl.prefix
	if err := c.Create(ctx, ts); err != nil {
		return fmt.Errorf("creating toolset %s/%s: %w", wl.namespace, wl.name, err)
	}
	return nil
}

// owners returns every name that wls publish, with the workload that must
// own it: the first that exposes it.
func owners(wls []*workload) map[string]*workload {
	out := map[string]*workload{}
	for _, wl := range wls {
		for _, tool := range wl.only {
			if _, taken := out[wl.prefix+tool]; !taken {
				out[wl.prefix+tool] = wl
			}
		}
	}
	return out
}

// routes maps each workload's Service host to its loopback address: what
// cluster DNS and the Service would do for an agent in a cluster.
func routes(wls []*workload) map[string]string {
	out := make(map[string]string, len(wls))
	for _, wl := range wls {
		out[wl.serviceHost()] = wl.addr
	}
	return out
}
