// Command gateway measures the gateway's throughput and added latency on
// loopback, against the same workload called directly in the same run.
//
// It starts the envtest control plane (the gateway reads its table only
// from ConfigMaps), the real example-tools binary as the one workload, and
// two replicas of the real gateway binary with no shared state, each
// serving a table of --tools tools (10,000 by default) spread over ten
// namespaces, every one routed to the workload's add tool through
// --resolve. The load generator is vegeta's library, the same for both
// paths:
//
//   - direct: POST /tools/add on the workload's invoke endpoint;
//   - gateway: MCP tools/call on /mcp, alternating between the two
//     replicas (the round-robin of a Service) and between the two protocol
//     eras: 2026-07-28 (stateless by design) and 2025-11-25 without a
//     session (the gateway answers 2025 clients statelessly by default).
//     The requests are the Go SDK client's own, recorded once per era and
//     replayed with a tool name drawn from the whole table;
//   - floor (unless --floor=false): the direct path's request, through two
//     bare httputil.ReverseProxy replicas (this binary, run again with
//     floor-proxy), placed where the gateway's replicas are: one more
//     server and one more client per call and nothing else. It is the
//     run's baseline for the hop: ratio_floor is what this machine lets
//     any Go proxy reach, and ratio/ratio_floor what the gateway's own
//     work costs beyond it.
//
// Each path first gets a warm-up that is not counted, then:
//
//   - throughput: --clients closed-loop clients for --duration, as fast as
//     each path answers; ratio = rps_gateway / rps_direct;
//   - latency: an open-loop rate of --latency-load of the lower of the two
//     throughputs, the same rate for both paths, for --duration each;
//     p50_added_ms and p99_added_ms are the gateway path's percentiles
//     less the direct path's;
//   - rss_mib: the larger of the two replicas' peak RSS (VmHWM).
//
// Each measured phase takes turns: --rounds rounds of each path, direct
// then gateway, each --duration/--rounds long, and a path's figures are
// those of all its rounds (its throughput is its calls over its rounds'
// time). On a shared machine, whose speed drifts over seconds as its
// host's other tenants come and go, a path measured only after the other
// would take the drift as its own; taking turns gives both the same.
//
// What the ratio measures depends on where the processes run:
//
//   - by default every process (the generator, the workload, both
//     replicas, the control plane) shares every core of the machine, so
//     the gateway path pays its hop (one more HTTP server and one more
//     client per call, in the replicas) out of the same cores that the
//     generator and the workload need: the ratio is what one machine's
//     CPU buys on each path. On two cores, where the generator and the
//     workload alone spend some 85 µs of CPU a call, even a proxy that
//     cost no more than a bare Go reverse hop could not reach 0.7;
//   - with --pin the generator (this process) and the workload run on one
//     CPU and the two replicas (and the floor's two) on another, on every
//     path (the direct path gets the same one CPU for its generator and
//     workload, the replicas' stays idle): as in a cluster where the gateway is a Deployment on
//     nodes of its own, the ratio is then what the hop costs in throughput
//     and latency when it does not take its CPU from the callers. The
//     control plane is not pinned. The figure line ends in pinned=1.
//
// Any failed call (a transport error, a status other than 200, a
// JSON-RPC error or an isError result) fails the run: a figure over errors
// would flatter the gateway. The last line it prints, on stdout, is the
// figure line; everything else, the per-era breakdown included, goes to
// stderr. Run it with `make bench-gateway`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type config struct {
	gatewayBin  string
	workloadBin string
	tools       int
	namespaces  int
	clients     int
	duration    time.Duration
	warmup      time.Duration
	latencyLoad float64
	latencyRate int
	rounds      int
	workDir     string
	cpuProfile  string
	pin         bool
	floor       bool
	gatewayEnv  envList
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == floorCommand {
		if err := serveFloor(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench-gateway "+floorCommand+":", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.StringVar(&c.gatewayBin, "gateway", "", "The gateway binary; empty builds cmd/gateway of this checkout.")
	flag.StringVar(&c.workloadBin, "workload", "", "The example-tools binary; empty builds cmd/example-tools of this checkout.")
	flag.IntVar(&c.tools, "tools", 10_000, "How many tools the gateways' table holds.")
	flag.IntVar(&c.namespaces, "namespaces", 10, "How many namespaces (each a ToolSet owner with its own Service) the tools are spread over.")
	flag.IntVar(&c.clients, "clients", 32, "How many concurrent clients the throughput phases run, and how many connections each path may use.")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "How long each measured phase lasts (throughput and latency, per path).")
	flag.IntVar(&c.rounds, "rounds", 5, "How many rounds each path's share of a measured phase is split into, the two paths taking turns: direct, gateway, direct, … (see --duration).")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "How long each path is warmed up before it is measured; not counted.")
	flag.Float64Var(&c.latencyLoad, "latency-load", 0.5, "The latency phases' offered rate, as a share of the lower of the two measured throughputs.")
	flag.IntVar(&c.latencyRate, "latency-rate", 0, "The latency phases' offered rate in requests per second; 0 derives it from --latency-load.")
	flag.StringVar(&c.workDir, "work-dir", "", "Where the kubeconfig and the processes' logs go (default: a temporary directory, removed after a successful run).")
	flag.StringVar(&c.cpuProfile, "cpu-profile", "", "A directory to write each replica's CPU profile of the gateway throughput phase to (gateway-N.cpu.pprof), taken over --pprof-bind-address; empty takes none.")
	flag.Var(&c.gatewayEnv, "gateway-env", "A NAME=value added to the replicas' environment, one a flag, repeatable (for example --gateway-env GOGC=200 --gateway-env GODEBUG=gctrace=1,madvdontneed=1).")
	flag.BoolVar(&c.pin, "pin", false, "Run the generator and the workload on one CPU and the two replicas (and the floor's) on another, on every path (as in a cluster where the gateway has nodes of its own), and say so in the figure line with pinned=1; needs two CPUs.")
	flag.BoolVar(&c.floor, "floor", true, "Also measure the floor, two bare httputil.ReverseProxy replicas placed as the gateway's are, as a third path of every phase; the figure line then ends in rps_floor, ratio_floor and p99_added_floor_ms.")
	flag.Parse()
	if c.tools <= 0 || c.namespaces <= 0 || c.clients <= 0 || c.duration <= 0 || c.rounds <= 0 || c.warmup < 0 ||
		c.latencyLoad <= 0 || c.latencyLoad > 1 || c.latencyRate < 0 {
		fmt.Fprintln(os.Stderr, "bench-gateway: --tools, --namespaces, --clients, --duration and --rounds must be positive, --warmup and --latency-rate not negative, --latency-load in (0, 1]")
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-gateway:", err)
		os.Exit(1)
	}
	fmt.Println(res.figureLine())
}

// envList is a repeatable flag of NAME=value, one a flag: a value may hold
// commas (GODEBUG's do).
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
		return fmt.Errorf("%q is not NAME=value", v)
	}
	*e = append(*e, v)
	return nil
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s ==> %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// result is what the figure line reports.
type result struct {
	tools, clients        int
	rpsDirect, rpsGateway float64
	p50Added, p99Added    time.Duration
	rssMiB                float64
	pinned                bool
	// The floor's, when it was measured (rpsFloor > 0).
	rpsFloor      float64
	p99AddedFloor time.Duration
}

func (r result) figureLine() string {
	ratio := 0.0
	if r.rpsDirect > 0 {
		ratio = r.rpsGateway / r.rpsDirect
	}
	line := fmt.Sprintf("tools=%d clients=%d rps_direct=%.0f rps_gateway=%.0f ratio=%.2f p50_added_ms=%.2f p99_added_ms=%.2f rss_mib=%.1f",
		r.tools, r.clients, r.rpsDirect, r.rpsGateway, ratio, ms(r.p50Added), ms(r.p99Added), r.rssMiB)
	if r.rpsFloor > 0 && r.rpsDirect > 0 {
		line += fmt.Sprintf(" rps_floor=%.0f ratio_floor=%.2f p99_added_floor_ms=%.2f", r.rpsFloor, r.rpsFloor/r.rpsDirect, ms(r.p99AddedFloor))
	}
	if r.pinned {
		line += " pinned=1"
	}
	return line
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
