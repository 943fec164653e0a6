package controllers

import (
	"fmt"
	"time"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Defaults of the admin ceilings, used when the manager leaves one unset.
// They sit at or above what a ToolSet gets by default, so that a ToolSet
// that asks for nothing special is never clamped.
const (
	// DefaultMaxToolsPerToolSet bounds the tools one ToolSet publishes.
	DefaultMaxToolsPerToolSet = 1000
	// DefaultMaxSchemaBytes bounds limits.maxSchemaBytes: one tool's input
	// or output schema.
	DefaultMaxSchemaBytes int32 = 256 << 10
	// DefaultMaxToolsPerNamespace bounds the tools the ToolSets of one
	// namespace publish together.
	DefaultMaxToolsPerNamespace = 5000
	// DefaultMaxTableBytes bounds the tool table's JSON, well below what
	// the publisher can write (spec.MaxTableBytes, and spec.MaxTableParts
	// parts of gzipped JSON).
	DefaultMaxTableBytes int64 = 32 << 20
	// DefaultMinInterval is the shortest interval a ToolSet gets: the API's
	// own minimum.
	DefaultMinInterval = 5 * time.Second
	// DefaultMaxTimeout is the longest timeout of one scrape.
	DefaultMaxTimeout = 30 * time.Second
)

// Ceilings cap what any ToolSet may ask for. They are set by the cluster
// admin (manager flags), not by tenants, as Prometheus Operator's enforced
// limits cap a ServiceMonitor. A ToolSet that asks for more is clamped, and
// its Clamped condition says so. Zero fields take the defaults above.
type Ceilings struct {
	// MaxToolsPerToolSet bounds the tools one ToolSet publishes; the excess,
	// the last by published name, is Denied with reason OverBudget.
	MaxToolsPerToolSet int
	// MaxSchemaBytes bounds limits.maxSchemaBytes.
	MaxSchemaBytes int32
	// MaxToolsPerNamespace bounds the tools the ToolSets of one namespace
	// publish together; the table publisher enforces it.
	MaxToolsPerNamespace int
	// MaxTableBytes bounds the tool table's JSON; the table publisher
	// enforces it.
	MaxTableBytes int64
	// MinInterval is the shortest interval a ToolSet gets.
	MinInterval time.Duration
	// MaxTimeout is the longest timeout of one scrape: no scrape, and so no
	// reconcile, waits on a Pod for longer.
	MaxTimeout time.Duration
}

// withDefaults fills the zero fields.
func (c Ceilings) withDefaults() Ceilings {
	if c.MaxToolsPerToolSet <= 0 {
		c.MaxToolsPerToolSet = DefaultMaxToolsPerToolSet
	}
	if c.MaxSchemaBytes <= 0 {
		c.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if c.MaxToolsPerNamespace <= 0 {
		c.MaxToolsPerNamespace = DefaultMaxToolsPerNamespace
	}
	if c.MaxTableBytes <= 0 {
		c.MaxTableBytes = DefaultMaxTableBytes
	}
	if c.MinInterval <= 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	return c
}

// effective is what one ToolSet gets under the ceilings.
type effective struct {
	interval time.Duration
	timeout  time.Duration
	limits   v1alpha1.Limits
	// maxTools bounds the tools the ToolSet publishes.
	maxTools int
	// clamped says what was lowered or raised, one entry per field, empty
	// when the ToolSet asked for nothing beyond the ceilings.
	clamped []string
}

// effectiveOf applies the ceilings to what a ToolSet asks for. Every
// message is built from the spec and the ceilings, never from the clock.
func (c Ceilings) effectiveOf(ts *v1alpha1.ToolSet) effective {
	c = c.withDefaults()
	e := effective{limits: ts.Spec.Limits, maxTools: c.MaxToolsPerToolSet}

	e.interval = defaultInterval
	if ts.Spec.Interval != nil && ts.Spec.Interval.Duration > 0 {
		e.interval = ts.Spec.Interval.Duration
	}
	if e.interval < c.MinInterval {
		e.clamped = append(e.clamped, fmt.Sprintf("spec.interval %s raised to the minimum %s (--min-interval)", e.interval, c.MinInterval))
		e.interval = c.MinInterval
	}

	e.timeout = defaultTimeout
	if ts.Spec.Timeout != nil && ts.Spec.Timeout.Duration > 0 {
		e.timeout = ts.Spec.Timeout.Duration
	}
	if e.timeout > c.MaxTimeout {
		e.clamped = append(e.clamped, fmt.Sprintf("spec.timeout %s lowered to the ceiling %s (--max-timeout)", e.timeout, c.MaxTimeout))
		e.timeout = c.MaxTimeout
	}
	e.timeout = min(e.timeout, e.interval)

	if e.limits.MaxSchemaBytes <= 0 || e.limits.MaxSchemaBytes > c.MaxSchemaBytes {
		if e.limits.MaxSchemaBytes > c.MaxSchemaBytes {
			e.clamped = append(e.clamped, fmt.Sprintf("spec.limits.maxSchemaBytes %d lowered to the ceiling %d (--max-schema-bytes)", e.limits.MaxSchemaBytes, c.MaxSchemaBytes))
		}
		e.limits.MaxSchemaBytes = c.MaxSchemaBytes
	}
	if int(e.limits.MaxTools) > c.MaxToolsPerToolSet {
		e.clamped = append(e.clamped, fmt.Sprintf("spec.limits.maxTools %d is above the ceiling of %d tools per ToolSet (--max-tools-per-toolset): tools past it are Denied (OverBudget)", e.limits.MaxTools, c.MaxToolsPerToolSet))
	}
	return e
}

// overToolSetBudget denies the tools of a ToolSet past its budget of
// maxTools: those last by published name, so that which are kept does not
// depend on the order the Pods serve them in. tools are sorted by name.
func overToolSetBudget(tools []spec.TableTool, maxTools int) map[string]ownership.Denial {
	if maxTools <= 0 || len(tools) <= maxTools {
		return nil
	}
	denied := make(map[string]ownership.Denial, len(tools)-maxTools)
	reason := fmt.Sprintf("the ToolSet publishes %d tools, more than %d (--max-tools-per-toolset); the first %d by name are kept", len(tools), maxTools, maxTools)
	for _, t := range tools[maxTools:] {
		denied[t.Name] = ownership.Denial{Policy: ownership.OverBudget, Reason: reason}
	}
	return denied
}
