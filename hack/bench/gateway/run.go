package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

const (
	tableNamespace = "toolplane-system"
	tableName      = "toolplane-tools"
	// sourceTool is the example-tools tool that every table entry routes
	// to: cheap, so that the figures are the paths' cost, not the tool's.
	sourceTool = "add"
	// service is the Service name of the workload in every namespace.
	service = "example-tools"
)

// addSchema is the input schema of example-tools' add tool.
var addSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","description":"The first addend"},"b":{"type":"integer","description":"The second addend"}},"required":["a","b"]}`)

func run(ctx context.Context, c config) (res result, err error) {
	res.tools, res.clients, res.pinned = c.tools, c.clients, c.pin
	keep := c.workDir != ""
	if keep {
		if c.workDir, err = filepath.Abs(c.workDir); err == nil {
			err = os.MkdirAll(c.workDir, 0o755)
		}
	} else {
		c.workDir, err = os.MkdirTemp("", "bench-gateway-")
	}
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil || keep {
			step("logs kept in %s", c.workDir)
			return
		}
		_ = os.RemoveAll(c.workDir)
	}()

	wlBin, gwBin := c.workloadBin, c.gatewayBin
	for _, b := range []struct {
		bin  *string
		name string
	}{{&wlBin, "example-tools"}, {&gwBin, "gateway"}} {
		if *b.bin != "" {
			continue
		}
		step("building %s", b.name)
		if *b.bin, err = harness.Build(ctx, ".", c.workDir, b.name); err != nil {
			return res, err
		}
	}

	step("starting the control plane")
	cp, err := harness.StartControlPlane(filepath.Join("config", "crd", "bases"), c.workDir)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	if err := cp.CreateNamespace(ctx, tableNamespace); err != nil {
		return res, err
	}

	var plan cpuPlan
	if c.pin {
		if plan, err = planCPUs(); err != nil {
			return res, err
		}
		// This process (the generator) and, as its child, the workload on
		// one CPU; the replicas are moved to the other as they start. The
		// control plane, started above, is left where it was.
		step("pinning the generator and the workload to CPU %d, the replicas to CPU %d", plan.client, plan.gateway)
		if err := pin(0, plan.client); err != nil {
			return res, err
		}
	}

	step("starting the workload (example-tools)")
	wlAddr, err := harness.FreeAddr()
	if err != nil {
		return res, err
	}
	wl := &harness.Process{Name: "example-tools", Bin: wlBin, LogPath: filepath.Join(c.workDir, "example-tools.log"),
		// The gateway sends the Service's name as Host; on loopback the
		// workload refuses a foreign Host unless told otherwise.
		Args: []string{"--addr", wlAddr, "--only", sourceTool, "--allow-any-host-on-loopback"}}
	if err := wl.Start(ctx, "http://"+wlAddr+spec.DefaultPath); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, wl.Stop(30*time.Second)) }()

	step("publishing a table of %d tools over %d namespaces", c.tools, c.namespaces)
	tools, resolve := table(c.tools, c.namespaces, wlAddr)
	parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, tableName)
	if err != nil {
		return res, err
	}
	for _, p := range parts {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tableNamespace, Name: p.Name}, Data: p.Data, BinaryData: p.BinaryData}
		if err := cp.Client.Create(ctx, cm); err != nil {
			return res, fmt.Errorf("creating ConfigMap %s: %w", p.Name, err)
		}
	}
	step("the table takes %d ConfigMaps", len(parts))

	step("starting two gateway replicas")
	gws := make([]*harness.Gateway, 2)
	pprofAddrs := make([]string, len(gws))
	for i := range gws {
		gws[i] = &harness.Gateway{Bin: gwBin, Kubeconfig: cp.Kubeconfig, TableNamespace: tableNamespace, Resolve: resolve,
			LogPath: filepath.Join(c.workDir, fmt.Sprintf("gateway-%d.log", i))}
		gws[i].Env = c.gatewayEnv
		if c.cpuProfile != "" {
			if pprofAddrs[i], err = harness.FreeAddr(); err != nil {
				return res, err
			}
			gws[i].Args = []string{"--pprof-bind-address", pprofAddrs[i]}
		}
		if err := gws[i].Start(ctx); err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, gws[i].Stop(30*time.Second)) }()
		if c.pin {
			if err := pin(gws[i].Pid(), plan.gateway); err != nil {
				return res, err
			}
		}
	}

	// The floor: two bare reverse proxies, placed as the replicas are.
	var floors []*harness.Process
	var floorURLs []string
	if c.floor {
		step("starting the floor: two bare httputil.ReverseProxy replicas in front of the workload")
		var self, addr string
		if self, err = os.Executable(); err != nil {
			return res, fmt.Errorf("finding this binary, to run the floor's replicas: %w", err)
		}
		for i := range 2 {
			if addr, err = harness.FreeAddr(); err != nil {
				return res, err
			}
			f := &harness.Process{Name: fmt.Sprintf("floor %d", i), Bin: self, LogPath: filepath.Join(c.workDir, fmt.Sprintf("floor-%d.log", i)),
				Args: []string{floorCommand, "--addr", addr, "--target", "http://" + wlAddr}}
			if err := f.Start(ctx, "http://"+addr+spec.DefaultPath); err != nil {
				return res, err
			}
			defer func() { err = errors.Join(err, f.Stop(30*time.Second)) }()
			if c.pin {
				if err := pin(f.Pid(), plan.gateway); err != nil {
					return res, err
				}
			}
			floors = append(floors, f)
			floorURLs = append(floorURLs, "http://"+addr+spec.InvokePrefix+sourceTool)
		}
	}

	names := make([]string, len(tools))
	for i := range tools {
		names[i] = tools[i].Name
	}
	direct := directTargeter("http://" + wlAddr + spec.InvokePrefix + sourceTool)
	gateway, err := gatewayTargeter(ctx, []string{gws[0].URL(), gws[1].URL()}, names)
	if err != nil {
		return res, err
	}

	step("warming up each path for %s", c.warmup)
	paths := []path{
		{name: "direct", tr: direct, cpu: func() []time.Duration { return []time.Duration{cpuOf(wl.Pid())} }},
		{name: "gateway", tr: gateway, cpu: func() []time.Duration {
			return []time.Duration{cpuOf(gws[0].Pid()) + cpuOf(gws[1].Pid()), cpuOf(wl.Pid())}
		}},
	}
	if c.floor {
		paths = append(paths, path{name: "floor", tr: directTargeter(floorURLs...), cpu: func() []time.Duration {
			return []time.Duration{cpuOf(floors[0].Pid()) + cpuOf(floors[1].Pid()), cpuOf(wl.Pid())}
		}})
	}
	for _, p := range paths {
		m := newMetrics()
		if err := attack(ctx, p.name+"-warmup", p.tr, 0, c.clients, c.warmup, &m); err != nil {
			return res, err
		}
	}

	step("throughput: %d clients for %s per path, in %d rounds of each", c.clients, c.duration, c.rounds)
	// The profiles span both paths' rounds; the replicas idle in the
	// direct ones.
	profiled := startProfiles(ctx, c.cpuProfile, pprofAddrs, 2*c.duration)
	thr, cpu, err := interleave(ctx, "throughput", paths, 0, c.clients, c.rounds, c.duration)
	err = errors.Join(err, profiled())
	if err := errors.Join(err, checkRefusals(ctx, gws)); err != nil {
		return res, err
	}
	dThr, gThr := thr[0], thr[1]
	// CPU per call, which a shared machine distorts far less than the
	// rates: the workload's on the direct path; the replicas' and the
	// workload's on the gateway path.
	if dThr.all.Requests > 0 && gThr.all.Requests > 0 {
		step("throughput: CPU per call: direct: workload %.0f µs; gateway: replicas %.0f µs, workload %.0f µs",
			perCall(cpu[0][0], dThr.all.Requests), perCall(cpu[1][0], gThr.all.Requests), perCall(cpu[1][1], gThr.all.Requests))
	}
	res.rpsDirect, res.rpsGateway = dThr.throughput(""), gThr.throughput("")
	step("throughput: direct %.0f/s, gateway %.0f/s (2026-07-28 %.0f/s, 2025-11-25 %.0f/s)",
		res.rpsDirect, res.rpsGateway, gThr.throughput(era2026), gThr.throughput(era2025))
	if c.floor {
		fThr := thr[2]
		res.rpsFloor = fThr.throughput("")
		step("throughput: floor %.0f/s; CPU per call: replicas %.0f µs, workload %.0f µs",
			res.rpsFloor, perCall(cpu[2][0], fThr.all.Requests), perCall(cpu[2][1], fThr.all.Requests))
	}

	rate := c.latencyRate
	if rate == 0 {
		rate = max(1, int(c.latencyLoad*min(res.rpsDirect, res.rpsGateway)))
	}
	step("latency: %d requests/s offered to each path for %s, in %d rounds of each", rate, c.duration, c.rounds)
	lat, cpu, err := interleave(ctx, "latency", paths, rate, c.clients, c.rounds, c.duration)
	if err := errors.Join(err, checkRefusals(ctx, gws)); err != nil {
		return res, err
	}
	dLat, gLat := lat[0], lat[1]
	// The same, at the same rate on both paths: the workload's CPU per
	// call depends on how busy it is (at a lower rate each call wakes it
	// on its own), which the throughput phases' rates differ in.
	if dLat.all.Requests > 0 && gLat.all.Requests > 0 {
		step("latency: CPU per call: direct: workload %.0f µs; gateway: replicas %.0f µs, workload %.0f µs",
			perCall(cpu[0][0], dLat.all.Requests), perCall(cpu[1][0], gLat.all.Requests), perCall(cpu[1][1], gLat.all.Requests))
	}
	res.p50Added = gLat.all.Latencies.P50 - dLat.all.Latencies.P50
	res.p99Added = gLat.all.Latencies.P99 - dLat.all.Latencies.P99
	step("latency: direct p50 %s p99 %s; gateway p50 %s p99 %s", dLat.all.Latencies.P50, dLat.all.Latencies.P99,
		gLat.all.Latencies.P50, gLat.all.Latencies.P99)
	for _, e := range []string{era2026, era2025} {
		m := gLat.eras[e]
		step("latency: gateway %s p50 %s p99 %s (added p50 %.2f ms, p99 %.2f ms)", e, m.Latencies.P50, m.Latencies.P99,
			ms(m.Latencies.P50-dLat.all.Latencies.P50), ms(m.Latencies.P99-dLat.all.Latencies.P99))
	}
	if c.floor {
		fLat := lat[2]
		res.p99AddedFloor = fLat.all.Latencies.P99 - dLat.all.Latencies.P99
		step("latency: floor p50 %s p99 %s (added p50 %.2f ms, p99 %.2f ms); CPU per call: replicas %.0f µs, workload %.0f µs",
			fLat.all.Latencies.P50, fLat.all.Latencies.P99, ms(fLat.all.Latencies.P50-dLat.all.Latencies.P50), ms(res.p99AddedFloor),
			perCall(cpu[2][0], fLat.all.Requests), perCall(cpu[2][1], fLat.all.Requests))
	}

	for i, g := range gws {
		st, err := harness.ReadProcStats(g.Pid())
		if err != nil {
			return res, err
		}
		peak := float64(st.PeakRSS) / (1 << 20)
		step("gateway %d: peak RSS %.1f MiB, CPU %s", i, peak, st.CPU)
		res.rssMiB = max(res.rssMiB, peak)
	}
	return res, nil
}

// perCall is d over n calls, in µs.
func perCall(d time.Duration, n uint64) float64 { return float64(d.Microseconds()) / float64(n) }

// cpuOf is the CPU time of process pid so far, 0 if it cannot be read.
func cpuOf(pid int) time.Duration {
	st, err := harness.ReadProcStats(pid)
	if err != nil {
		return 0
	}
	return st.CPU
}

// checkRefusals says what each replica has refused at its bounds so far,
// and fails if any refused anything: the bench's clients are legitimate, and a
// figure over refusals would flatter the gateway (a refused call also
// fails its phase; this says which bound it was).
func checkRefusals(ctx context.Context, gws []*harness.Gateway) error {
	var errs []error
	for i, g := range gws {
		r, err := refusals(ctx, g.MetricsAddr)
		if err != nil {
			errs = append(errs, fmt.Errorf("gateway %d: reading its refusals: %w", i, err))
			continue
		}
		step("gateway %d refused:%s", i, formatRefusals(r))
		for reason, n := range r {
			if n > 0 {
				errs = append(errs, fmt.Errorf("gateway %d refused %.0f at its %s bound", i, n, reason))
			}
		}
	}
	return errors.Join(errs...)
}

// table returns n tools in the table's format, spread over namespaces
// team-0, team-1, … in ToolSets of ten, each routed to the add tool of the
// Service example-tools of its namespace; and the --resolve map that sends
// every such Service to the workload at addr.
func table(n, namespaces int, addr string) ([]spec.TableTool, map[string]string) {
	tools := make([]spec.TableTool, n)
	resolve := map[string]string{}
	for i := range tools {
		ns := fmt.Sprintf("team-%d", i%namespaces)
		host := fmt.Sprintf("%s.%s.svc:8080", service, ns)
		resolve[host] = addr
		tools[i] = spec.TableTool{
			Name:        fmt.Sprintf("t%05d_%s", i, sourceTool),
			SourceName:  sourceTool,
			Description: description(i),
			InputSchema: addSchema,
			Annotations: &spec.Annotations{ReadOnlyHint: ptr(true), IdempotentHint: ptr(true)},
			ToolSet:     spec.ObjectReference{Namespace: ns, Name: fmt.Sprintf("set-%04d", i/(10*namespaces))},
			Endpoints:   &spec.Endpoints{Invoke: "http://" + host + spec.InvokePrefix + sourceTool, MCP: "http://" + host + spec.MCPPath},
		}
	}
	spec.SortTableTools(tools)
	return tools, resolve
}

// words make descriptions that differ as real ones do, so that the table
// compresses (and takes ConfigMaps) more like a real one.
var words = strings.Fields(`account address amount archive batch billing branch cache calendar
	campaign cart catalog channel city claim client code contract cost country coupon credit
	currency customer dashboard date delivery device discount document domain email employee
	event export feed file filter forecast fund group history inventory invoice item journal
	label ledger limit list location log market member message metric note offer order owner
	payment period plan policy price product profile project query quota rate record region
	report request return review risk role route sale schedule score segment shipment sku
	status stock store subscription supplier survey task tax team ticket token total trade
	transaction trend user vendor warehouse weather`)

// description returns tool i's description: a dozen or so words drawn
// from words, the same for the same i.
func description(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 27))
	n := 10 + r.IntN(10)
	d := make([]string, n)
	for j := range d {
		d[j] = words[r.IntN(len(words))]
	}
	return "Looks up " + strings.Join(d, " ") + "; returns at most limit matches."
}

func ptr[T any](v T) *T { return &v }
