package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolplane/toolplane/toolkit/discovery"
)

// agentCalls are the demo agent's tool calls, with arguments as sloppy as a
// small model sends them: a city in another script and spelling, and
// numbers as strings with an upper-case enum. The workloads' binders repair
// them.
var agentCalls = []struct{ tool, args string }{
	{"get_weather", `{"city":"北京市"}`},
	{"crm_evaluate_transaction_risk", `{"amount":"15000.00","customerRiskScore":"70","transactionType":"INTERNATIONAL",}`},
}

// agent closes the loop as an agent in the cluster would: it reads the
// table from a ConfigMap volume through toolkit/discovery, looks tools up
// and calls them at the endpoints the table gives.
func agent(ctx context.Context, st *settled, wls []*workload, dir string, r *report) error {
	r.step("The agent: toolkit/discovery loads the table from the ConfigMap's files, as mounted in a Pod (%s)", dir)
	if err := writeVolume(dir, st.configMaps); err != nil {
		return err
	}
	for _, wl := range wls {
		r.detail("its dialer stands in for cluster DNS: %s → %s", wl.serviceHost(), wl.addr)
	}
	hc := loopbackClient(routes(wls))
	defer hc.CloseIdleConnections()
	ag := &discovery.Client{HTTPClient: hc, Timeout: 10 * time.Second}
	if err := ag.LoadDir(dir); err != nil {
		return fmt.Errorf("the agent loading the table: %w", err)
	}
	if ag.Revision() != st.table.Revision {
		return fmt.Errorf("the agent read revision %s, the ConfigMap holds %s", ag.Revision(), st.table.Revision)
	}
	r.detail("%d tools, revision %s", len(ag.Table().Tools), short(ag.Revision()))

	for _, call := range agentCalls {
		tool, ok := ag.Lookup(call.tool)
		if !ok {
			return fmt.Errorf("the agent found no tool %s in the table", call.tool)
		}
		r.step("Calling %s %s", call.tool, call.args)
		r.detail("owner %s, POST %s", tool.ToolSet, tool.Endpoints.Invoke)
		res, err := ag.Call(ctx, call.tool, call.args)
		if err != nil {
			return fmt.Errorf("the agent calling %s: %w", call.tool, err)
		}
		if res.IsError {
			return fmt.Errorf("the agent calling %s: the tool answered with an error: %s", call.tool, res.Text())
		}
		r.detail("→ %s", clip(res.Text()))
	}
	return nil
}

// writeVolume writes the keys of the table's ConfigMaps into dir as files,
// as a projected ConfigMap volume shows them to a Pod.
func writeVolume(dir string, cms []corev1.ConfigMap) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, cm := range cms {
		for k, v := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(k)), []byte(v), 0o644); err != nil {
				return err
			}
		}
		for k, v := range cm.BinaryData {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(k)), v, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// loopbackClient is the agent's HTTP client. The table's endpoints name
// Services by their cluster DNS names, which resolve nowhere outside a
// cluster; its dialer stands in for cluster DNS and the Service, and dials
// the loopback address of the workload behind each Service host. Any other
// address is refused, so that nothing leaves the machine.
func loopbackClient(routes map[string]string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a proxy from the environment would not know these hosts
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := routes[addr]
		if !ok {
			return nil, fmt.Errorf("no demo workload behind %s", addr)
		}
		return d.DialContext(ctx, network, to)
	}
	return &http.Client{Transport: tr}
}
