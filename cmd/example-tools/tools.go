package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// EchoInput is typed_echo's input, and its output: one field of every kind
// the binder handles, so that a user sees what it made of their arguments.
type EchoInput struct {
	Text     string            `json:"text" description:"Any text. The only required argument"`
	Count    int               `json:"count,omitempty" tool:"minimum=0;maximum=1000" default:"1"`
	Big      int64             `json:"big,omitempty" description:"Exact over the whole int64 range"`
	Unsigned uint64            `json:"unsigned,omitempty" description:"Exact over the whole uint64 range"`
	Small    int8              `json:"small,omitempty"`
	Ratio    float64           `json:"ratio,omitempty"`
	Flag     bool              `json:"flag,omitempty"`
	Status   string            `json:"status,omitempty" tool:"enum=created|paid|shipped"`
	Tags     []string          `json:"tags,omitempty"`
	Scores   []int             `json:"scores,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Address  *Address          `json:"address,omitempty"`
	When     *time.Time        `json:"when,omitempty" description:"An RFC 3339 date-time"`
	Payload  []byte            `json:"payload,omitempty" description:"Base64"`
}

// Address is a postal address.
type Address struct {
	City   string `json:"city"`
	Street string `json:"street,omitempty"`
}

// Identity is whoami's output: the caller, as the server verified it.
type Identity struct {
	Subject   string   `json:"subject" description:"Who is calling; empty for an anonymous call"`
	Groups    []string `json:"groups" description:"The groups of the subject"`
	RequestID string   `json:"requestId,omitempty" description:"The id the gateway gave the call"`
}

// whoami reports the call's toolkit.Caller, whoever set it: with
// --caller-jwks-url, only a transaction token that verified does.
func whoami(ctx context.Context, _ struct{}) (Identity, error) {
	c, _ := toolkit.CallerFrom(ctx)
	id := Identity{Subject: c.Subject, Groups: c.Groups, RequestID: c.RequestID}
	if id.Groups == nil {
		id.Groups = []string{}
	}
	return id, nil
}

func typedEcho(_ context.Context, in EchoInput) (EchoInput, error) { return in, nil }

// InsightRequest is system_insight's input.
type InsightRequest struct {
	Category string `json:"category" tool:"enum=tools|memory|version"`
}

// Insight is system_insight's output: one of its parts, by category.
type Insight struct {
	Category string          `json:"category"`
	Tools    *ToolsInsight   `json:"tools,omitempty"`
	Memory   *MemoryInsight  `json:"memory,omitempty"`
	Version  *VersionInsight `json:"version,omitempty"`
}

// ToolsInsight counts and names the tools served.
type ToolsInsight struct {
	Count int      `json:"count"`
	Names []string `json:"names"`
}

// MemoryInsight is a few of Go's memory statistics, in bytes.
type MemoryInsight struct {
	HeapAllocBytes uint64 `json:"heapAllocBytes"`
	HeapSysBytes   uint64 `json:"heapSysBytes"`
	TotalAlloc     uint64 `json:"totalAllocBytes"`
	NumGC          uint32 `json:"numGC"`
	Goroutines     int    `json:"goroutines"`
}

// VersionInsight is what the binary knows of its build.
type VersionInsight struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Module    string `json:"module"`
}

// version is the main module's version, "(devel)" for a local build.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func systemInsight(reg *toolkit.Registry) func(context.Context, InsightRequest) (Insight, error) {
	return func(_ context.Context, in InsightRequest) (Insight, error) {
		out := Insight{Category: in.Category}
		switch in.Category {
		case "tools":
			specs := reg.Specs()
			names := make([]string, len(specs))
			for i, s := range specs {
				names[i] = s.Name
			}
			out.Tools = &ToolsInsight{Count: len(names), Names: names}
		case "memory":
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			out.Memory = &MemoryInsight{
				HeapAllocBytes: m.HeapAlloc, HeapSysBytes: m.HeapSys, TotalAlloc: m.TotalAlloc,
				NumGC: m.NumGC, Goroutines: runtime.NumGoroutine(),
			}
		case "version":
			v := &VersionInsight{Version: version(), GoVersion: runtime.Version()}
			if bi, ok := debug.ReadBuildInfo(); ok {
				v.Module = bi.Main.Path
			}
			out.Version = v
		default:
			return Insight{}, fmt.Errorf("unknown category %q; use tools, memory or version", in.Category)
		}
		return out, nil
	}
}

var errOverflow = errors.New("the sum does not fit in a 64-bit integer")

// add is the dynamic add tool. Its schema comes from the parameter builder,
// and its arguments arrive as a map: integers as json.Number, so that they
// are exact.
func add(_ context.Context, args map[string]any) (any, error) {
	a, err := int64Arg(args, "a")
	if err != nil {
		return nil, err
	}
	b, err := int64Arg(args, "b")
	if err != nil {
		return nil, err
	}
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return nil, errOverflow
	}
	return map[string]any{"sum": a + b}, nil
}

func int64Arg(args map[string]any, name string) (int64, error) {
	// The schema makes a and b required integers, so only their range can
	// still be wrong here.
	n, ok := args[name].(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: expected an integer, received %v", name, args[name])
	}
	v, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%s: expected an integer in the 64-bit range, received %s", name, n)
	}
	return v, nil
}

// exampleTools declares every tool of the sample, in the three ways toolkit
// offers: typed functions, method scanning (create_ticket) and a dynamic
// tool (add).
func exampleTools(reg *toolkit.Registry, helpdesk *Helpdesk) ([]*toolkit.Tool, error) {
	var tools []*toolkit.Tool
	var errs []error
	keep := func(t *toolkit.Tool, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		tools = append(tools, t)
	}

	keep(toolkit.New("typed_echo",
		"Return the arguments exactly as the server bound them, to see what it made of them. Only text is required.",
		typedEcho, toolkit.Title("Typed echo"), toolkit.ReadOnly(), toolkit.Idempotent(), toolkit.OpenWorld(false),
		toolkit.Category("debug")))
	keep(toolkit.New("query_customer",
		"Look customers up by name in the CRM, case-insensitively. Returns at most limit customers and the number of matches.",
		queryCustomer, toolkit.Title("Query customer"), toolkit.ReadOnly(), toolkit.OpenWorld(false),
		toolkit.Category("crm"), toolkit.Version("1.0.0")))
	keep(toolkit.New("get_weather",
		"Current weather of a Chinese city, by its Chinese or English name (北京, 北京市, Beijing, 西安, Xi'an). Temperatures are in degrees Celsius.",
		getWeather, toolkit.Title("Get weather"), toolkit.ReadOnly(), toolkit.OpenWorld(false),
		toolkit.Category("weather")))
	keep(toolkit.New("evaluate_transaction_risk",
		"Score a transaction's risk from its amount, the customer's risk score (0 to 100, higher is more trustworthy) and its type, and recommend what to do.",
		evaluateTransactionRisk, toolkit.Title("Evaluate transaction risk"), toolkit.ReadOnly(), toolkit.Idempotent(),
		toolkit.OpenWorld(false), toolkit.Category("risk")))
	keep(toolkit.New("search_orders",
		"Find orders by status, optionally only those carrying every one of the given tags.",
		searchOrders, toolkit.Title("Search orders"), toolkit.ReadOnly(), toolkit.OpenWorld(false),
		toolkit.Category("crm")))

	scanned, err := toolkit.Scan(helpdesk, toolkit.Method{
		Name:        "CreateTicket",
		Description: "Open a support ticket with a title and a priority, and return it with its id.",
		Options:     []toolkit.Option{toolkit.Title("Create ticket"), toolkit.Destructive(true), toolkit.OpenWorld(false), toolkit.Category("support")},
	})
	if err != nil {
		errs = append(errs, err)
	}
	tools = append(tools, scanned...)
	keep(toolkit.New("delete_ticket",
		"Delete a support ticket by its id, after asking the user to confirm (MCP elicitation): a client that cannot be asked gets an error, and nothing is deleted.",
		deleteTicket(helpdesk), toolkit.Title("Delete ticket"), toolkit.Asks(), toolkit.Destructive(true), toolkit.Idempotent(), toolkit.OpenWorld(false),
		toolkit.Category("support")))

	addSchema, err := new(toolkit.Params).
		Integer("a", "The first addend").
		Integer("b", "The second addend").
		Build()
	if err != nil {
		errs = append(errs, err)
	} else {
		keep(toolkit.NewDynamic("add", "Add two integers exactly.", addSchema, add,
			toolkit.Title("Add"), toolkit.ReadOnly(), toolkit.Idempotent(), toolkit.OpenWorld(false), toolkit.Category("math")))
	}

	keep(toolkit.New("build_report",
		"Write a report section by section. It takes a while (sections times delayMs), and reports its progress to MCP clients that ask for it. An MCP client may call it as a task (execution.taskSupport optional), and poll it or cancel it.",
		buildReport, toolkit.Title("Build report"), toolkit.ReadOnly(), toolkit.OpenWorld(false),
		toolkit.Category("reports"), toolkit.Timeout(time.Minute), toolkit.TaskSupport(spec.TaskSupportOptional)))
	keep(toolkit.New("whoami",
		"Tell who is calling, as this server verified it: the subject and groups that the gateway's transaction token names. An anonymous call has no subject.",
		whoami, toolkit.Title("Who am I"), toolkit.ReadOnly(), toolkit.Idempotent(), toolkit.OpenWorld(false),
		toolkit.Category("debug")))
	keep(toolkit.New("system_insight",
		"Report on this server: the tools it serves, its Go memory statistics, or its version.",
		systemInsight(reg), toolkit.Title("System insight"), toolkit.ReadOnly(), toolkit.OpenWorld(false),
		toolkit.Category("debug")))

	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tools, nil
}

// selectTools keeps the tools named in only, a comma-separated list; all of
// them when only is empty. A name that is not a tool is an error, so that a
// typo in a Deployment fails at start, not when an agent looks for it.
func selectTools(tools []*toolkit.Tool, only string) ([]*toolkit.Tool, error) {
	if strings.TrimSpace(only) == "" {
		return tools, nil
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.Name())
	}
	var out []*toolkit.Tool
	var unknown []string
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		i := slices.Index(names, n)
		if i < 0 {
			unknown = append(unknown, strconv.Quote(n))
			continue
		}
		if !slices.Contains(out, tools[i]) {
			out = append(out, tools[i])
		}
	}
	if len(unknown) > 0 {
		slices.Sort(names)
		return nil, fmt.Errorf("--only names unknown tools %s; the tools are %s", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return out, nil
}
