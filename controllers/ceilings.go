package controllers

import (
	"encoding/json"
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
	// DefaultMaxTableBytes bounds the tool table's JSON: 40 MiB, room for
	// 50,000 tools of 700 bytes (5,000 ToolSets of ten small tools, 34 MiB)
	// with a sixth to spare, under the 44 MiB the ConfigMaps hold of real
	// tools, and what every gateway replica and agent decodes and holds.
	// --max-table-bytes may raise it to what readers accept
	// (spec.MaxTableBytes). What the encoder cannot lay out, and what does
	// not fit the ConfigMaps once gzipped (about 11.6 MiB), is denied
	// besides.
	DefaultMaxTableBytes int64 = 40 << 20
	// DefaultMaxDescriptionBytes bounds one tool's description: room for
	// a long manual page, not for a tenant to fill the table with one tool.
	DefaultMaxDescriptionBytes = 16 << 10
	// DefaultMaxTitleBytes bounds one tool's title, and its annotations'.
	DefaultMaxTitleBytes = 1 << 10
	// DefaultMaxAnnotationsBytes bounds one tool's annotations, as JSON.
	DefaultMaxAnnotationsBytes = 4 << 10
	// DefaultMaxMetaBytes bounds one tool's _meta, as JSON.
	DefaultMaxMetaBytes = 16 << 10
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
	// MaxDescriptionBytes, MaxTitleBytes, MaxAnnotationsBytes and
	// MaxMetaBytes bound what one tool carries besides its schemas: its
	// description, its title (and its annotations' title), its annotations
	// and its _meta as JSON. A tool past one is Invalid, with the bound
	// named; the rest of its ToolSet is still published.
	MaxDescriptionBytes int
	MaxTitleBytes       int
	MaxAnnotationsBytes int
	MaxMetaBytes        int
	// MinInterval is the shortest interval a ToolSet gets.
	MinInterval time.Duration
	// MaxTimeout is the longest timeout of one scrape: no scrape, and so no
	// reconcile, waits on a Pod for longer.
	MaxTimeout time.Duration
}

// Validate refuses ceilings the publisher cannot honour: a table's JSON
// beyond what readers accept (spec.MaxTableBytes), or a negative bound.
func (c Ceilings) Validate() error {
	if c.MaxTableBytes > spec.MaxTableBytes {
		return fmt.Errorf("--max-table-bytes %d is above %d, what readers of the table accept", c.MaxTableBytes, spec.MaxTableBytes)
	}
	for flag, v := range map[string]int64{
		"max-table-bytes": c.MaxTableBytes, "max-tool-description-bytes": int64(c.MaxDescriptionBytes), "max-tool-title-bytes": int64(c.MaxTitleBytes),
		"max-tool-annotations-bytes": int64(c.MaxAnnotationsBytes), "max-tool-meta-bytes": int64(c.MaxMetaBytes),
	} {
		if v < 0 {
			return fmt.Errorf("--%s %d is negative", flag, v)
		}
	}
	return nil
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
	c.MaxDescriptionBytes = orDefault(max(c.MaxDescriptionBytes, 0), DefaultMaxDescriptionBytes)
	c.MaxTitleBytes = orDefault(max(c.MaxTitleBytes, 0), DefaultMaxTitleBytes)
	c.MaxAnnotationsBytes = orDefault(max(c.MaxAnnotationsBytes, 0), DefaultMaxAnnotationsBytes)
	c.MaxMetaBytes = orDefault(max(c.MaxMetaBytes, 0), DefaultMaxMetaBytes)
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
	// bounds bound each tool's description, title, annotations and _meta.
	bounds toolBounds
	// clamped says what was lowered or raised, one entry per field, empty
	// when the ToolSet asked for nothing beyond the ceilings.
	clamped []string
}

// effectiveOf applies the ceilings to what a ToolSet asks for. Every
// message is built from the spec and the ceilings, never from the clock.
func (c Ceilings) effectiveOf(ts *v1alpha1.ToolSet) effective {
	c = c.withDefaults()
	e := effective{limits: ts.Spec.Limits, maxTools: c.MaxToolsPerToolSet, bounds: toolBounds{
		description: c.MaxDescriptionBytes, title: c.MaxTitleBytes, annotations: c.MaxAnnotationsBytes, meta: c.MaxMetaBytes,
	}}

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

// toolBounds bound what one tool carries besides its schemas, in bytes.
type toolBounds struct {
	description, title, annotations, meta int
}

// defaultToolBounds are the bounds of the default ceilings.
var defaultToolBounds = Ceilings{}.effectiveOf(&v1alpha1.ToolSet{}).bounds

// check refuses a tool past a bound, naming the bound and its flag.
func (b toolBounds) check(t *spec.Tool) error {
	over := func(field string, n, bound int, flag string) error {
		return fmt.Errorf("%s is %d bytes, more than %d (--%s)", field, n, bound, flag)
	}
	if n := len(t.Description); n > b.description {
		return over("description", n, b.description, "max-tool-description-bytes")
	}
	if n := len(t.Title); n > b.title {
		return over("title", n, b.title, "max-tool-title-bytes")
	}
	if t.Annotations != nil {
		if n := len(t.Annotations.Title); n > b.title {
			return over("annotations.title", n, b.title, "max-tool-title-bytes")
		}
		if raw, err := json.Marshal(t.Annotations); err != nil || len(raw) > b.annotations {
			return over("annotations", len(raw), b.annotations, "max-tool-annotations-bytes")
		}
	}
	if t.Meta != nil {
		raw, err := json.Marshal(t.Meta)
		if err != nil {
			return fmt.Errorf("_meta does not encode as JSON: %w", err)
		}
		if len(raw) > b.meta {
			return over("_meta", len(raw), b.meta, "max-tool-meta-bytes")
		}
	}
	return nil
}
