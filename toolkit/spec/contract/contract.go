package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Change is one difference between two versions of a tool.
type Change struct {
	// Path is where the change is, as a JSON path from the tool:
	// inputSchema.properties.customer.properties.id, say. A property
	// reached through a local $ref is named where it is used, not in $defs.
	Path string `json:"path"`
	// Breaking is set when a caller written against the old version may
	// fail against the new one.
	Breaking bool `json:"breaking"`
	// Message says what changed, in plain words.
	Message string `json:"message"`
}

// String returns "breaking: path: message" or "compatible: path: message".
func (c Change) String() string {
	kind := "compatible"
	if c.Breaking {
		kind = "breaking"
	}
	return kind + ": " + c.Path + ": " + c.Message
}

// Version is one version of a tool's contract: what [Compare] reads.
type Version struct {
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  *spec.Annotations
	Execution    *spec.Execution
}

// FromTool returns the contract of a tool in a spec document.
func FromTool(t spec.Tool) Version {
	return Version{Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: t.Execution}
}

// FromTableTool returns the contract of a tool in the tool table.
func FromTableTool(t spec.TableTool) Version {
	return Version{Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: t.Execution}
}

// Removed is the change of a tool that is no longer offered: always
// breaking.
func Removed(name string) Change {
	return Change{Path: name, Breaking: true, Message: "the tool was removed"}
}

// Breaking returns the breaking changes of changes.
func Breaking(changes []Change) []Change {
	var out []Change
	for _, c := range changes {
		if c.Breaking {
			out = append(out, c)
		}
	}
	return out
}

// Compare classifies the changes from old to new. It returns nil when the
// two have the same contract and description. Changes are sorted by path,
// and each path is listed once per kind of change.
func Compare(old, new Version) []Change {
	c := &comparer{}
	if old.Description != new.Description {
		c.add("description", false, "the description changed")
	}
	c.annotations(old.Annotations, new.Annotations)
	c.execution(old.Execution, new.Execution)
	c.schemaDoc("inputSchema", old.InputSchema, new.InputSchema, input)
	c.schemaDoc("outputSchema", old.OutputSchema, new.OutputSchema, output)
	slices.SortStableFunc(c.changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return c.changes
}

// direction says which way a schema's values flow. A caller sends input,
// so an input schema must not come to reject what it accepted; a caller
// reads output, so an output schema must not come to allow what it ruled
// out.
type direction int

const (
	input direction = iota
	output
)

// maxDepth bounds the recursion through nested schemas and $refs: a
// schema deeper than this is compared as a whole, conservatively.
const maxDepth = 64

// maxNodes bounds the schema nodes one comparison visits. $refs can make a
// small document describe a tree exponentially large; past this bound the
// rest is taken as breaking.
const maxNodes = 20000

type comparer struct {
	changes []Change
	// roots resolve local $refs, old and new.
	oldRoot, newRoot any
	// seen guards against cycles through $refs.
	seen map[[2]string]bool
	// visited counts schema nodes against maxNodes; exhausted is set once
	// the bound is reached and reported.
	visited   int
	exhausted bool
	// full is set once maxChanges are listed.
	full bool
}

// maxChanges bounds the changes one comparison lists.
const maxChanges = 200

func (c *comparer) add(path string, breaking bool, format string, args ...any) {
	if c.full {
		return
	}
	if len(c.changes) >= maxChanges {
		c.full = true
		c.changes = append(c.changes, Change{Path: path, Breaking: true, Message: "more changes than toolplane lists; the rest is taken as breaking"})
		return
	}
	c.changes = append(c.changes, Change{Path: path, Breaking: breaking, Message: fmt.Sprintf(format, args...)})
}

// execution compares task support: a change is breaking when a way of
// calling the tool that worked, as a task or not, no longer does.
func (c *comparer) execution(old, new *spec.Execution) {
	support := func(e *spec.Execution) string {
		if e == nil || e.TaskSupport == "" {
			return spec.TaskSupportForbidden
		}
		return e.TaskSupport
	}
	o, n := support(old), support(new)
	if o == n {
		return
	}
	breaking := (!old.TasksRequired() && new.TasksRequired()) || (old.Tasks() && !new.Tasks())
	c.add("execution.taskSupport", breaking, "task support changed from %s to %s", o, n)
}

func (c *comparer) annotations(old, new *spec.Annotations) {
	yes, no := true, false
	// MCP's defaults apply to a hint that is not given.
	hint := func(a *spec.Annotations, get func(*spec.Annotations) *bool, def bool) bool {
		if a == nil || get(a) == nil {
			return def
		}
		return *get(a)
	}
	for _, h := range []struct {
		name string
		get  func(*spec.Annotations) *bool
		def  bool
		// breaksTo is the value that breaks callers when a hint changes
		// to it: they may have let the tool run unguarded, or retried it.
		breaksTo *bool
	}{
		{"destructiveHint", func(a *spec.Annotations) *bool { return a.DestructiveHint }, true, &yes},
		{"readOnlyHint", func(a *spec.Annotations) *bool { return a.ReadOnlyHint }, false, &no},
		{"idempotentHint", func(a *spec.Annotations) *bool { return a.IdempotentHint }, false, &no},
		{"openWorldHint", func(a *spec.Annotations) *bool { return a.OpenWorldHint }, true, nil},
	} {
		o, n := hint(old, h.get, h.def), hint(new, h.get, h.def)
		if o == n {
			continue
		}
		path := "annotations." + h.name
		if h.breaksTo != nil && n == *h.breaksTo {
			c.add(path, true, "%s changed from %t to %t", h.name, o, n)
		} else {
			c.add(path, false, "%s changed from %t to %t", h.name, o, n)
		}
	}
	ot, nt := "", ""
	if old != nil {
		ot = old.Title
	}
	if new != nil {
		nt = new.Title
	}
	if ot != nt {
		c.add("annotations.title", false, "the title changed")
	}
}

func parse(raw json.RawMessage) (any, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// Not JSON: compare it as an opaque value.
		return string(raw), true
	}
	return v, true
}

func (c *comparer) schemaDoc(path string, oldRaw, newRaw json.RawMessage, dir direction) {
	o, oOK := parse(oldRaw)
	n, nOK := parse(newRaw)
	switch {
	case !oOK && !nOK:
		return
	case !oOK:
		c.add(path, false, "%s was added", path)
		return
	case !nOK:
		c.add(path, dir == output, "%s was removed", path)
		return
	}
	c.oldRoot, c.newRoot, c.seen = o, n, map[[2]string]bool{}
	c.visited, c.exhausted = 0, false
	c.schema(path, o, n, dir, 0)
}

// annotationKeywords change what a schema means to a reader, never what it
// accepts.
var annotationKeywords = map[string]bool{
	"description": true, "title": true, "examples": true, "default": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "$schema": true, "$id": true,
	"$anchor": true, "contentMediaType": true, "x-order": true,
}

// handled are the keywords the comparison understands; any other keyword
// that differs is a change it cannot classify, taken as breaking.
var handled = map[string]bool{
	"type": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "prefixItems": true, "$defs": true, "definitions": true,
	"anyOf": true, "oneOf": true, "allOf": true, "$ref": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "multipleOf": true, "uniqueItems": true,
	"contentEncoding": true,
}

func (c *comparer) schema(path string, o, n any, dir direction, depth int) {
	// Equal schemas that hold a $ref may still name changed definitions.
	if equal(o, n) && !hasRef(o) {
		return
	}
	oRef, nRef := refOf(o), refOf(n)
	if depth > maxDepth {
		c.add(path, true, "the schema changed deeper than toolplane compares; taken as breaking")
		return
	}
	if c.full {
		return
	}
	if c.visited++; c.visited > maxNodes {
		if !c.exhausted {
			c.exhausted = true
			c.add(path, true, "the schemas are too large to compare in full; the rest is taken as breaking")
		}
		return
	}
	if oRef != "" || nRef != "" {
		key := [2]string{oRef, nRef}
		if c.seen[key] {
			return // a cycle, compared where it began
		}
		c.seen[key] = true
		defer delete(c.seen, key)
		o, n = c.deref(o, c.oldRoot), c.deref(n, c.newRoot)
		if equal(o, n) && !hasRef(o) {
			return
		}
	}

	// true and {} both allow any value: compare them as the same schema.
	if b, ok := o.(bool); ok && b {
		if _, isMap := n.(map[string]any); isMap {
			o = map[string]any{}
		}
	}
	if b, ok := n.(bool); ok && b {
		if _, isMap := o.(map[string]any); isMap {
			n = map[string]any{}
		}
	}
	ob, oIsBool := o.(bool)
	nb, nIsBool := n.(bool)
	om, oIsMap := o.(map[string]any)
	nm, nIsMap := n.(map[string]any)
	if oIsBool || nIsBool || !oIsMap || !nIsMap {
		// true accepts anything, false nothing; an object of annotations
		// only is true.
		wider := (nIsBool && nb) || (oIsBool && !ob) || (nIsMap && allowsAll(nm))
		narrower := (oIsBool && ob) || (nIsBool && !nb) || (oIsMap && allowsAll(om))
		switch {
		case wider && !narrower:
			c.add(path, dir == output, "the schema now allows any value")
		case narrower && !wider:
			c.add(path, dir == input, "the schema now allows fewer values")
		default:
			c.add(path, true, "the schema changed in a way toolplane cannot classify; taken as breaking")
		}
		return
	}

	c.types(path, om, nm, dir)
	c.enum(path, om, nm, dir)
	c.bounds(path, om, nm, dir)
	c.object(path, om, nm, dir, depth)
	c.array(path, om, nm, dir, depth)
	c.combinators(path, om, nm, dir, depth)

	var described, unknown []string
	for _, k := range keys(om, nm) {
		if handled[k] || equal(om[k], nm[k]) {
			continue
		}
		if annotationKeywords[k] {
			described = append(described, k)
			continue
		}
		unknown = append(unknown, k)
	}
	if len(described) > 0 {
		c.add(path, false, "%s changed", strings.Join(described, ", "))
	}
	if len(unknown) > 0 {
		c.add(path, true, "%s changed; toolplane does not classify %s, so it is taken as breaking",
			strings.Join(unknown, ", "), plural(len(unknown), "this keyword", "these keywords"))
	}
}

// allowsAll reports whether a schema object has no assertion at all.
func allowsAll(m map[string]any) bool {
	for k := range m {
		if !annotationKeywords[k] {
			return false
		}
	}
	return true
}

// narrow reports a change that lets fewer values through: breaking for
// input, compatible for output. widen is the converse.
func (c *comparer) narrow(path string, dir direction, format string, args ...any) {
	c.add(path, dir == input, format, args...)
}

func (c *comparer) widen(path string, dir direction, format string, args ...any) {
	c.add(path, dir == output, format, args...)
}

func (c *comparer) types(path string, o, n map[string]any, dir direction) {
	ot, oOK := typeSet(o["type"])
	nt, nOK := typeSet(n["type"])
	if !oOK || !nOK {
		if !equal(o["type"], n["type"]) {
			c.add(path, true, "the type changed from %s to %s", show(o["type"]), show(n["type"]))
		}
		return
	}
	if slices.Equal(ot, nt) {
		return
	}
	// An absent type allows every type.
	lost, gained := typeDiff(ot, nt), typeDiff(nt, ot)
	switch {
	case len(lost) > 0 && len(gained) > 0:
		c.add(path, true, "the type changed from %s to %s", typeWords(ot), typeWords(nt))
	case len(lost) > 0:
		c.narrow(path, dir, "the type narrowed from %s to %s", typeWords(ot), typeWords(nt))
	default:
		c.widen(path, dir, "the type widened from %s to %s", typeWords(ot), typeWords(nt))
	}
}

// typeSet returns the types a "type" keyword allows, sorted; nil for
// every type. ok is false for a malformed keyword.
func typeSet(v any) ([]string, bool) {
	switch t := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{t}, true
	case []any:
		var out []string
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return slices.Compact(out), true
	}
	return nil, false
}

// typeDiff returns the types a allows and b does not. nil allows all, and
// number includes integer.
func typeDiff(a, b []string) []string {
	if b == nil {
		return nil
	}
	if a == nil {
		return []string{"any"}
	}
	var out []string
	for _, t := range a {
		if slices.Contains(b, t) || (t == "integer" && slices.Contains(b, "number")) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func typeWords(t []string) string {
	if t == nil {
		return "any type"
	}
	return strings.Join(t, " or ")
}

func (c *comparer) enum(path string, o, n map[string]any, dir direction) {
	ov, oHas := enumValues(o)
	nv, nHas := enumValues(n)
	switch {
	case !oHas && !nHas:
		return
	case !oHas:
		c.narrow(path, dir, "values are now limited to %s", showValues(nv))
		return
	case !nHas:
		c.widen(path, dir, "values are no longer limited to %s", showValues(ov))
		return
	}
	removed, added := valueDiff(ov, nv), valueDiff(nv, ov)
	if len(removed) > 0 {
		c.narrow(path, dir, "enum values removed: %s", showValues(removed))
	}
	if len(added) > 0 {
		c.widen(path, dir, "enum values added: %s", showValues(added))
	}
}

// enumValues returns the values enum or const allows, in canonical JSON.
func enumValues(m map[string]any) ([]string, bool) {
	var vals []string
	has := false
	if e, ok := m["enum"].([]any); ok {
		has = true
		for _, v := range e {
			vals = append(vals, canon(v))
		}
	}
	if cv, ok := m["const"]; ok {
		if has {
			if !slices.Contains(vals, canon(cv)) {
				return nil, true
			}
			return []string{canon(cv)}, true
		}
		return []string{canon(cv)}, true
	}
	return vals, has
}

func valueDiff(a, b []string) []string {
	var out []string
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

func showValues(v []string) string {
	if len(v) > 5 {
		return strings.Join(v[:5], ", ") + fmt.Sprintf(" and %d more", len(v)-5)
	}
	return strings.Join(v, ", ")
}

// lower bounds narrow when they rise; upper bounds narrow when they fall.
// An absent count bound is its neutral value: minLength 0 adds nothing.
var lowerCounts = []string{"minLength", "minItems", "minProperties"}
var upperCounts = []string{"maxLength", "maxItems", "maxProperties"}

// limit is a numeric bound: its value, and whether the value itself is
// excluded. A nil value is no bound.
type limit struct {
	v         *big.Rat
	exclusive bool
}

// numericLimit returns a schema's effective lower (or upper) bound on
// numbers, the tighter of minimum and exclusiveMinimum (maximum and
// exclusiveMaximum). On a schema of integers only, the bound is the
// integer it admits, so that exclusiveMinimum 0 is minimum 1. ok is false
// for a bound that is not a number.
func numericLimit(m map[string]any, lower bool) (l limit, ok bool) {
	incl, excl := "maximum", "exclusiveMaximum"
	if lower {
		incl, excl = "minimum", "exclusiveMinimum"
	}
	iv, iHas := number(m[incl])
	ev, eHas := number(m[excl])
	if (iHas && iv == nil) || (eHas && ev == nil) {
		return limit{}, false
	}
	if iHas {
		l = limit{v: iv}
	}
	if eHas && (l.v == nil || tighterLimit(limit{v: ev, exclusive: true}, l, lower)) {
		l = limit{v: ev, exclusive: true}
	}
	if t, _ := typeSet(m["type"]); l.v != nil && slices.Equal(t, []string{"integer"}) {
		l = integerLimit(l, lower)
	}
	return l, true
}

// integerLimit is the inclusive integer bound that l admits.
func integerLimit(l limit, lower bool) limit {
	num, den := l.v.Num(), l.v.Denom()
	q, r := new(big.Int).DivMod(num, den, new(big.Int)) // floor
	whole := r.Sign() == 0
	switch {
	case lower && (l.exclusive || !whole):
		q.Add(q, big.NewInt(1)) // the next integer up
	case !lower && l.exclusive && whole:
		q.Sub(q, big.NewInt(1))
	}
	return limit{v: new(big.Rat).SetInt(q)}
}

// tighterLimit reports whether a admits fewer values than b.
func tighterLimit(a, b limit, lower bool) bool {
	if b.v == nil {
		return a.v != nil
	}
	if a.v == nil {
		return false
	}
	c := a.v.Cmp(b.v)
	if !lower {
		c = -c
	}
	return c > 0 || c == 0 && a.exclusive && !b.exclusive
}

func (l limit) String(lower bool) string {
	op := map[[2]bool]string{{true, false}: ">=", {true, true}: ">", {false, false}: "<=", {false, true}: "<"}[[2]bool{lower, l.exclusive}]
	return op + " " + l.v.RatString()
}

func (c *comparer) bounds(path string, o, n map[string]any, dir direction) {
	for _, lower := range []bool{true, false} {
		ol, oOK := numericLimit(o, lower)
		nl, nOK := numericLimit(n, lower)
		word := "upper"
		if lower {
			word = "lower"
		}
		switch {
		case !oOK || !nOK:
			for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
				if !equal(o[k], n[k]) {
					c.add(path, true, "%s changed from %s to %s; taken as breaking", k, show(o[k]), show(n[k]))
				}
			}
		case tighterLimit(nl, ol, lower):
			if ol.v == nil {
				c.narrow(path, dir, "a %s bound %s was added", word, nl.String(lower))
			} else {
				c.narrow(path, dir, "the %s bound tightened from %s to %s", word, ol.String(lower), nl.String(lower))
			}
		case tighterLimit(ol, nl, lower):
			if nl.v == nil {
				c.widen(path, dir, "the %s bound %s was removed", word, ol.String(lower))
			} else {
				c.widen(path, dir, "the %s bound relaxed from %s to %s", word, ol.String(lower), nl.String(lower))
			}
		}
		if !oOK || !nOK {
			break
		}
	}
	count := func(k string, lower bool) {
		ov, oHas := number(o[k])
		nv, nHas := number(n[k])
		if (oHas && ov == nil) || (nHas && nv == nil) {
			if !equal(o[k], n[k]) {
				c.add(path, true, "%s changed from %s to %s; taken as breaking", k, show(o[k]), show(n[k]))
			}
			return
		}
		if lower {
			// No lower bound on a count is 0.
			if !oHas {
				ov, oHas = new(big.Rat), true
			}
			if !nHas {
				nv, nHas = new(big.Rat), true
			}
		}
		switch {
		case !oHas && !nHas:
		case !oHas:
			c.narrow(path, dir, "%s %s was added", k, nv.RatString())
		case !nHas:
			c.widen(path, dir, "%s %s was removed", k, ov.RatString())
		default:
			cmp := nv.Cmp(ov)
			if cmp == 0 {
				return
			}
			if (lower && cmp > 0) || (!lower && cmp < 0) {
				c.narrow(path, dir, "%s tightened from %s to %s", k, ov.RatString(), nv.RatString())
			} else {
				c.widen(path, dir, "%s relaxed from %s to %s", k, ov.RatString(), nv.RatString())
			}
		}
	}
	for _, k := range lowerCounts {
		count(k, true)
	}
	for _, k := range upperCounts {
		count(k, false)
	}

	om, oHas := number(o["multipleOf"])
	nm, nHas := number(n["multipleOf"])
	switch {
	case !oHas && !nHas:
	case !oHas:
		c.narrow(path, dir, "multipleOf %s was added", show(n["multipleOf"]))
	case !nHas:
		c.widen(path, dir, "multipleOf %s was removed", show(o["multipleOf"]))
	case om == nil || nm == nil || om.Sign() == 0 || nm.Sign() == 0:
		if !equal(o["multipleOf"], n["multipleOf"]) {
			c.add(path, true, "multipleOf changed; taken as breaking")
		}
	case om.Cmp(nm) != 0:
		// The old multiples are all new multiples when old/new is whole.
		q := new(big.Rat).Quo(om, nm)
		if q.IsInt() {
			c.widen(path, dir, "multipleOf relaxed from %s to %s", om.RatString(), nm.RatString())
		} else {
			c.narrow(path, dir, "multipleOf changed from %s to %s", om.RatString(), nm.RatString())
		}
	}

	for _, k := range []string{"pattern", "format"} {
		ov, oHas := o[k]
		nv, nHas := n[k]
		switch {
		case equal(ov, nv):
		case !oHas:
			c.narrow(path, dir, "%s %s was added", k, show(nv))
		case !nHas:
			c.widen(path, dir, "%s %s was removed", k, show(ov))
		default:
			// Whether one pattern matches less than another is undecidable
			// in general: a changed pattern or format is a narrowing.
			c.narrow(path, dir, "%s changed from %s to %s", k, show(ov), show(nv))
		}
	}

	if !equal(o["contentEncoding"], n["contentEncoding"]) {
		// toolkit decodes base64 into bytes: the same string now means
		// other bytes (or none), whichever way it flows.
		c.add(path, true, "contentEncoding changed from %s to %s: the same text now stands for other data", show(o["contentEncoding"]), show(n["contentEncoding"]))
	}

	ou, _ := o["uniqueItems"].(bool)
	nu, _ := n["uniqueItems"].(bool)
	switch {
	case !ou && nu:
		c.narrow(path, dir, "items must now be unique")
	case ou && !nu:
		c.widen(path, dir, "items no longer need to be unique")
	}
}

// number returns a numeric keyword exactly. has is false when it is
// absent; the value is nil when it is present but not a number.
func number(v any) (r *big.Rat, has bool) {
	if v == nil {
		return nil, false
	}
	num, ok := v.(json.Number)
	if !ok || !boundedNumber(string(num)) {
		return nil, true
	}
	r, ok = new(big.Rat).SetString(string(num))
	if !ok {
		return nil, true
	}
	return r, true
}

// boundedNumber refuses numbers whose exact value would be costly to
// build: big.Rat expands 1e999999999 in full.
func boundedNumber(s string) bool {
	if len(s) > 64 {
		return false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		return err == nil && exp >= -400 && exp <= 400
	}
	return true
}

func (c *comparer) object(path string, o, n map[string]any, dir direction, depth int) {
	op, _ := o["properties"].(map[string]any)
	np, _ := n["properties"].(map[string]any)
	oreq, nreq := stringSet(o["required"]), stringSet(n["required"])

	var removed, added []string
	for _, k := range keys(op, np) {
		_, inOld := op[k]
		_, inNew := np[k]
		switch {
		case inOld && !inNew:
			removed = append(removed, k)
		case !inOld && inNew:
			added = append(added, k)
		}
	}
	// A property removed and one added with the same schema is a rename.
	renamed := map[string]string{}
	for _, r := range removed {
		for _, a := range added {
			if _, taken := renamed[a]; !taken && equal(op[r], np[a]) {
				renamed[a] = r
				break
			}
		}
	}
	renamedFrom := map[string]bool{}
	for a, r := range renamed {
		renamedFrom[r] = true
		c.add(propPath(path, r), true, "property %q was renamed to %q", r, a)
	}
	for _, r := range removed {
		if !renamedFrom[r] {
			c.add(propPath(path, r), true, "property %q was removed", r)
		}
	}
	for _, a := range added {
		if _, ok := renamed[a]; ok {
			continue
		}
		oap, closed := o["additionalProperties"].(bool)
		closed = closed && !oap
		apSchema, _ := o["additionalProperties"].(map[string]any)
		switch {
		case nreq[a] && dir == input:
			c.add(propPath(path, a), true, "property %q was added and is required", a)
		case dir == output && closed:
			// The old schema promised no other property: a reader that
			// holds results to it now refuses them.
			c.add(propPath(path, a), true, "property %q was added to an object whose schema allowed no other property", a)
		case apSchema != nil && !allowsAll(apSchema):
			// The name was allowed before, as any additional property.
			c.schema(propPath(path, a), apSchema, np[a], dir, depth+1)
		case dir == input:
			c.add(propPath(path, a), false, "optional property %q was added", a)
		default:
			c.add(propPath(path, a), false, "property %q was added", a)
		}
	}
	for _, k := range keys(op, np) {
		ov, inOld := op[k]
		nv, inNew := np[k]
		if !inOld || !inNew {
			continue
		}
		switch {
		case !oreq[k] && nreq[k]:
			c.narrow(propPath(path, k), dir, "property %q is now required", k)
		case oreq[k] && !nreq[k]:
			c.widen(propPath(path, k), dir, "property %q is no longer required", k)
		}
		c.schema(propPath(path, k), ov, nv, dir, depth+1)
	}
	// Names required without a property schema.
	for k := range nreq {
		if _, ok := np[k]; !ok && !oreq[k] {
			c.narrow(propPath(path, k), dir, "property %q is now required", k)
		}
	}
	for k := range oreq {
		if _, ok := op[k]; !ok && !nreq[k] {
			if _, inNew := np[k]; !inNew {
				c.widen(propPath(path, k), dir, "property %q is no longer required", k)
			}
		}
	}

	oa, oHas := o["additionalProperties"]
	na, nHas := n["additionalProperties"]
	if equal(oa, na) {
		return
	}
	if !oHas {
		oa = true
	}
	if !nHas {
		na = true
	}
	c.schema(path+".additionalProperties", oa, na, dir, depth+1)
}

func (c *comparer) array(path string, o, n map[string]any, dir direction, depth int) {
	oi, oHas := o["items"]
	ni, nHas := n["items"]
	if oHas || nHas {
		if !oHas {
			oi = true
		}
		if !nHas {
			ni = true
		}
		c.schema(path+".items", oi, ni, dir, depth+1)
	}
	op, _ := o["prefixItems"].([]any)
	np, _ := n["prefixItems"].([]any)
	if equal(o["prefixItems"], n["prefixItems"]) {
		return
	}
	if len(op) != len(np) {
		c.add(path+".prefixItems", true, "the number of prefixItems changed from %d to %d; taken as breaking", len(op), len(np))
		return
	}
	for i := range op {
		c.schema(fmt.Sprintf("%s.prefixItems[%d]", path, i), op[i], np[i], dir, depth+1)
	}
}

func (c *comparer) combinators(path string, o, n map[string]any, dir direction, depth int) {
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if equal(o[k], n[k]) {
			continue
		}
		ol, oOK := o[k].([]any)
		nl, nOK := n[k].([]any)
		p := path + "." + k
		switch {
		case oOK && nOK && len(ol) == len(nl) && subset(ol, nl) && subset(nl, ol):
			// The same alternatives in another order.
		case k == "oneOf" && oOK && nOK && len(ol) != len(nl) && !disjoint(append(slices.Clone(ol), nl...)):
			// A value must match exactly one: an alternative that overlaps
			// another changes which values match one, both ways.
			c.add(p, true, "oneOf changed from %s to %s, and its alternatives overlap: a value that matched one may now match two; taken as breaking",
				plural(len(ol), "alternative", "alternatives"), plural(len(nl), "alternative", "alternatives"))
		case len(ol) == len(nl) && oOK && nOK:
			for i := range ol {
				c.schema(fmt.Sprintf("%s[%d]", p, i), ol[i], nl[i], dir, depth+1)
			}
		case k != "allOf" && oOK && nOK && subset(ol, nl):
			// More alternatives accept more values.
			c.widen(p, dir, "%s gained %s", k, plural(len(nl)-len(ol), "alternative", "alternatives"))
		case k != "allOf" && oOK && nOK && subset(nl, ol):
			c.narrow(p, dir, "%s lost %s", k, plural(len(ol)-len(nl), "alternative", "alternatives"))
		default:
			c.add(p, true, "%s changed in a way toolplane cannot classify; taken as breaking", k)
		}
	}
}

// disjoint reports whether no value can match two of the schemas, as far
// as their types and consts show: each must name its types (or be a
// const or enum), and no two may share one.
func disjoint(schemas []any) bool {
	var seen []string // type names, and canonical values of consts/enums
	for i, s := range schemas {
		if slices.ContainsFunc(schemas[:i], func(p any) bool { return same(p, s) }) {
			continue // the same alternative in old and new
		}
		m, ok := s.(map[string]any)
		if !ok {
			return false
		}
		var mine []string
		if vals, has := enumValues(m); has {
			for _, v := range vals {
				mine = append(mine, "value:"+v)
			}
		} else {
			t, ok := typeSet(m["type"])
			if !ok || t == nil {
				return false
			}
			for _, x := range t {
				mine = append(mine, "type:"+x)
				if x == "number" {
					mine = append(mine, "type:integer")
				}
			}
		}
		for _, x := range mine {
			if slices.Contains(seen, x) {
				return false
			}
			if strings.HasPrefix(x, "value:") {
				// A const overlaps any alternative typed like it.
				if typ := jsonTypeOf(strings.TrimPrefix(x, "value:")); typ != "" && (slices.Contains(seen, "type:"+typ) || typ == "integer" && slices.Contains(seen, "type:number")) {
					return false
				}
			} else if slices.ContainsFunc(seen, func(v string) bool {
				if !strings.HasPrefix(v, "value:") {
					return false
				}
				typ := jsonTypeOf(strings.TrimPrefix(v, "value:"))
				return "type:"+typ == x || x == "type:number" && typ == "integer"
			}) {
				return false
			}
		}
		seen = append(seen, mine...)
	}
	return true
}

// jsonTypeOf names the JSON type of a canonical JSON value.
func jsonTypeOf(v string) string {
	switch {
	case v == "null":
		return "null"
	case v == "true" || v == "false":
		return "boolean"
	case strings.HasPrefix(v, `"`):
		return "string"
	case strings.HasPrefix(v, "{"):
		return "object"
	case strings.HasPrefix(v, "["):
		return "array"
	case strings.ContainsAny(v, ".eE"):
		return "number"
	}
	return "integer"
}

// subset reports whether every schema of a is in b.
func subset(a, b []any) bool {
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y any) bool { return same(x, y) }) {
			return false
		}
	}
	return true
}

// hasRef reports whether a schema holds a $ref anywhere.
func hasRef(s any) bool {
	switch v := s.(type) {
	case map[string]any:
		if _, ok := v["$ref"]; ok {
			return true
		}
		for _, e := range v {
			if hasRef(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasRef(e) {
				return true
			}
		}
	}
	return false
}

func refOf(s any) string {
	m, ok := s.(map[string]any)
	if !ok {
		return ""
	}
	r, _ := m["$ref"].(string)
	return r
}

// deref follows a local $ref ("#/$defs/Name", "#/definitions/Name" or any
// JSON pointer into the root). Keywords beside the $ref apply too, so they
// are merged over the target. A ref it cannot follow stays as it is, and
// compares as an unknown keyword.
func (c *comparer) deref(s, root any) any {
	for range maxDepth {
		m, ok := s.(map[string]any)
		if !ok {
			return s
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return s
		}
		target, ok := pointer(root, ref)
		if !ok {
			return s
		}
		tm, ok := target.(map[string]any)
		if !ok {
			if len(m) == 1 {
				return target
			}
			return s
		}
		merged := make(map[string]any, len(tm)+len(m))
		for k, v := range tm {
			merged[k] = v
		}
		for k, v := range m {
			if k != "$ref" {
				merged[k] = v
			}
		}
		if _, again := tm["$ref"]; !again {
			delete(merged, "$ref")
			return merged
		}
		merged["$ref"] = tm["$ref"]
		s = merged
	}
	return s
}

func pointer(root any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// propPath appends a property to a path: .name, or ["odd name"].
func propPath(path, name string) string {
	if identRE.MatchString(name) {
		return path + ".properties." + name
	}
	b, _ := json.Marshal(name)
	return path + ".properties[" + string(b) + "]"
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	l, _ := v.([]any)
	for _, e := range l {
		if s, ok := e.(string); ok {
			out[s] = true
		}
	}
	return out
}

func keys(a, b map[string]any) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// canon is v's canonical JSON: object names sorted, and numbers by value,
// so that 1 and 1.0 are one value, as JSON Schema compares them.
func canon(v any) string {
	b, err := json.Marshal(canonNumbers(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if r, ok := number(x); ok && r != nil {
			if r.IsInt() {
				return json.Number(r.Num().String())
			}
			if f, exact := r.Float64(); exact {
				return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
			}
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = canonNumbers(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = canonNumbers(e)
		}
		return l
	}
	return v
}

// same reports whether two schemas or values are the same JSON, numbers
// compared by value.
func same(a, b any) bool { return equal(a, b) || canon(a) == canon(b) }

// equal compares two decoded JSON values; numbers compare by their text.
func equal(a, b any) bool { return reflect.DeepEqual(a, b) }

func show(v any) string {
	if v == nil {
		return "none"
	}
	s := canon(v)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		if strings.HasPrefix(one, "this") {
			return one
		}
		return "1 " + one
	}
	if strings.HasPrefix(many, "these") {
		return many
	}
	return strconv.Itoa(n) + " " + many
}
