// Command scale measures the operator at scale: 1,000 or 5,000 ToolSets of
// 10 tools each, against the physical limit of the same API server in the
// same run.
//
// It starts the envtest control plane, a few loopback workloads that serve
// every tool set, and the real manager binary in a process of its own. It
// then measures:
//
//   - convergence: from the last ToolSet created until the table holds
//     every tool and every ToolSet is Ready with every tool Published;
//   - the baseline: how long a plain client-go loop, at the manager's
//     concurrency, takes to write the status of as many ToolSets, the very
//     status the manager writes for them (a run whose ToolSets the manager
//     left with another fails). Run before the manager starts, so that
//     nothing competes with it, with the same watches of ToolSets as the
//     manager's writes reach;
//   - steady state over three scrape intervals: API writes (the API
//     server's own apiserver_request_total, leases left out), the
//     manager's CPU time (/proc/<pid>/stat) and scrapes answered;
//   - churn over a few intervals: one in ten workloads changes a tool in
//     each, spread over the interval; how long each change takes to show in
//     the table, and the bytes written to the table's ConfigMaps per change
//     (every write as the watch delivers it, until one grace period after
//     the last change, so that the removal of old chunks counts);
//   - the manager's peak RSS (VmHWM) and the table's ConfigMaps.
//
// The last line it prints, on stdout, is the figure line; everything else
// goes to stderr. Run it with `make bench-scale` (BENCH_SIZE=5000 for the
// larger size).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/toolplane/toolplane/controllers"
)

type config struct {
	manager     string
	toolSets    int
	tools       int
	servers     int
	namespaces  int
	interval    time.Duration
	concurrency int
	timeout     time.Duration
	workDir     string
	pprof       bool
	// convergenceOnly stops the run after convergence.
	convergenceOnly bool
	// distinctSchemas gives every tool set schemas of its own.
	distinctSchemas bool

	churnIntervals int
	churnTimeout   time.Duration
	partGrace      time.Duration
	goMemLimit     string
	goGC           string
}

func main() {
	var c config
	flag.StringVar(&c.manager, "manager", "bin/manager", "The manager binary.")
	flag.IntVar(&c.toolSets, "toolsets", 1000, "How many ToolSets, each with one Pod and its own tool set.")
	flag.IntVar(&c.tools, "tools", 10, "How many tools each tool set serves.")
	flag.IntVar(&c.servers, "servers", 4, "How many loopback servers share the tool sets.")
	flag.BoolVar(&c.distinctSchemas, "distinct-schemas", false, "Give every tool set input schemas of its own (a description naming the set), so that no two ToolSets serve a schema alike; by default every tool has the same schema, as the replicas of one workload would.")
	flag.IntVar(&c.namespaces, "namespaces", 0, "How many namespaces the ToolSets are spread over; 0 means one per 50 ToolSets.")
	flag.DurationVar(&c.interval, "interval", 30*time.Second, "spec.interval of every ToolSet; steady state lasts three of them.")
	flag.IntVar(&c.concurrency, "concurrency", 0, "The baseline loop's concurrency; 0 reads the manager's ToolSet reconcile workers, which make its status writes, from its metrics.")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "How long convergence may take before the run fails.")
	flag.StringVar(&c.workDir, "work-dir", "", "Where the kubeconfig, the manager's log and profiles go (default: a temporary directory).")
	flag.BoolVar(&c.pprof, "pprof", false, "Run the manager with --pprof-bind-address and save CPU (convergence, steady state) and heap profiles (after convergence, heap-converged.pprof, and after churn, heap.pprof) into the work directory.")
	flag.BoolVar(&c.convergenceOnly, "convergence-only", false, "Stop after convergence (and the baseline): the figure line has the size and the convergence figures only. For comparing convergence run after run.")
	flag.IntVar(&c.churnIntervals, "churn-intervals", 3, "How many intervals the churn phase lasts; in each, one in ten workloads changes a tool. 0 skips the phase.")
	flag.DurationVar(&c.churnTimeout, "churn-timeout", 2*time.Minute, "How long after the last change of the churn phase the table may take to show every change.")
	flag.DurationVar(&c.partGrace, "table-part-grace-period", controllers.DefaultTablePartGracePeriod, "The manager's --table-part-grace-period; the churn phase counts the writes until one grace period after its last change.")
	flag.StringVar(&c.goMemLimit, "gomemlimit", "chart", `The manager's GOMEMLIMIT: "chart" computes it as the chart does with its defaults (goMemLimitPercent of resources.limits.memory in charts/toolplane/values.yaml); "" or 0 leaves it unset; anything else is passed as it is.`)
	flag.StringVar(&c.goGC, "gogc", "", `The manager's GOGC, for weighing its peak memory against its CPU; "" leaves it unset, as the chart does.`)
	flag.Parse()
	if c.namespaces <= 0 {
		c.namespaces = max(1, c.toolSets/50)
	}
	if c.toolSets <= 0 || c.tools <= 0 || c.servers <= 0 || c.interval <= 0 || c.churnIntervals < 0 {
		fmt.Fprintln(os.Stderr, "bench-scale: --toolsets, --tools, --servers and --interval must be positive, --churn-intervals not negative")
		os.Exit(2)
	}
	// The watcher's client-go machinery logs through controller-runtime;
	// its chatter would bury the figures.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
	fmt.Println(res.figureLine())
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s ==> %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func prepareWorkDir(c *config) (cleanup func(), err error) {
	if c.workDir != "" {
		c.workDir, err = filepath.Abs(c.workDir)
		if err != nil {
			return nil, err
		}
		return func() {}, os.MkdirAll(c.workDir, 0o755)
	}
	c.workDir, err = os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return nil, err
	}
	return func() { _ = os.RemoveAll(c.workDir) }, nil
}

// chartValues is where the chart's defaults are.
const chartValues = "charts/toolplane/values.yaml"

// resolveGoMemLimit returns the GOMEMLIMIT that flag asks for, "" for none.
func resolveGoMemLimit(flag string) (string, error) {
	switch flag {
	case "", "0":
		return "", nil
	case "chart":
	default:
		return flag, nil
	}
	raw, err := os.ReadFile(chartValues)
	if err != nil {
		return "", err
	}
	var v struct {
		Resources struct {
			Limits struct {
				Memory string `json:"memory"`
			} `json:"limits"`
		} `json:"resources"`
		GoMemLimitPercent int64 `json:"goMemLimitPercent"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%s: %w", chartValues, err)
	}
	if v.Resources.Limits.Memory == "" || v.GoMemLimitPercent <= 0 {
		return "", nil
	}
	q, err := resource.ParseQuantity(v.Resources.Limits.Memory)
	if err != nil {
		return "", fmt.Errorf("%s: resources.limits.memory: %w", chartValues, err)
	}
	// As the chart's toolplane.goMemLimitOf computes it, rounded down.
	return strconv.FormatInt(q.Value()*v.GoMemLimitPercent/100, 10), nil
}

var errNotConverged = errors.New("did not converge")
