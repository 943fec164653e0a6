package toolkit

import (
	"encoding/json"
	"errors"
)

// Redactor redacts the arguments of one tool for a record that outlives
// the call (an audit log, a trace), from the tool's input schema alone: a
// gateway or proxy that holds a tool's schema but not its [Tool] redacts
// as the tool's own [Logging] middleware does. Make one with
// [NewRedactor]; it is safe for concurrent use.
type Redactor struct {
	plan *plan
	// whole redacts every argument: the schema marks a value sensitive
	// where the plan cannot follow it (under oneOf, allOf, …).
	whole bool
}

// NewRedactor returns the Redactor of a tool whose input schema is
// schema: a value is sensitive where the schema says "writeOnly": true or
// "x-sensitive": true (toolkit serves a field tagged tool:"sensitive" so),
// or inside such a value. When the schema marks a value sensitive under a
// keyword that toolkit does not follow (oneOf, allOf, not, if, …), every
// argument is redacted, since which one is sensitive cannot be told.
func NewRedactor(schema json.RawMessage) (*Redactor, error) {
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, errors.Join(errors.New("toolkit: the input schema is not JSON"), err)
	}
	p, _ := buildPlan(doc)
	r := &Redactor{plan: p}
	if marksSensitive(doc) && (!p.anySensitive || hasOpaque(p, map[*plan]bool{})) {
		r.whole = true
	}
	return r, nil
}

// Redact returns args as JSON with the value of every sensitive field
// replaced by "[redacted]". It reads args as the tool's binder does
// (leniently, a wrapped argument object unwrapped, double-encoded values
// decoded), so that no repair carries a sensitive value past it; arguments
// that cannot be read at all are "[redacted]" whole. The result is always
// valid JSON.
func (r *Redactor) Redact(args json.RawMessage) json.RawMessage {
	whole := json.RawMessage(`"` + redacted + `"`)
	if r == nil || r.whole {
		return whole
	}
	v, tp := parseArguments(args)
	if tp != nil {
		return whole
	}
	if s, ok := v.(string); ok {
		if v, tp = parseLenient([]byte(s)); tp != nil {
			return whole
		}
	}
	v = unwrap(r.plan, v)
	b, err := json.Marshal(redactValue(r.plan, v))
	if err != nil {
		return whole
	}
	return b
}

// marksSensitive reports whether any schema in doc says writeOnly or
// x-sensitive.
func marksSensitive(doc any) bool {
	switch x := doc.(type) {
	case map[string]any:
		if x["writeOnly"] == true || x["x-sensitive"] == true {
			return true
		}
		for _, v := range x {
			if marksSensitive(v) {
				return true
			}
		}
	case []any:
		for _, v := range x {
			if marksSensitive(v) {
				return true
			}
		}
	}
	return false
}

// hasOpaque reports whether p, or a plan it leads to, is one whose values
// redactValue cannot follow.
func hasOpaque(p *plan, seen map[*plan]bool) bool {
	if p == nil || seen[p] {
		return false
	}
	seen[p] = true
	if p.opaque {
		return true
	}
	if hasOpaque(p.ref, seen) || hasOpaque(p.extra, seen) || hasOpaque(p.items, seen) {
		return true
	}
	for _, c := range p.props {
		if hasOpaque(c, seen) {
			return true
		}
	}
	return false
}
