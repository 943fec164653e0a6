package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxReceived bounds how much of a bad value an error message quotes back.
const maxReceived = 80

// step is one step of a JSON path: an object key, or an array index when
// index >= 0. The binder keeps the steps to the current value on a stack,
// and turns them into text only for a problem, so that binding valid
// arguments allocates nothing for paths.
type step struct {
	key   string
	index int
}

func pathString(steps []step) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range steps {
		writeStep(&b, s.key, s.index)
	}
	return b.String()
}

func writeStep(b *strings.Builder, key string, index int) {
	if index >= 0 {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(index))
		b.WriteByte(']')
		return
	}
	if isIdentifier(key) {
		b.WriteByte('.')
		b.WriteString(key)
		return
	}
	b.WriteByte('[')
	q, _ := json.Marshal(key)
	b.Write(q)
	b.WriteByte(']')
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// binder collects problems while repairing and decoding one call's
// arguments.
type binder struct {
	root     *plan // for redaction; nil when the tool has no sensitive values
	problems []Problem
	paths    map[string]bool // paths that have a problem already
	path     []step
	stack    [8]step // backing for path, so shallow arguments need no allocation
}

func (b *binder) push(key string, index int) {
	if b.path == nil {
		b.path = b.stack[:0]
	}
	b.path = append(b.path, step{key: key, index: index})
}

func (b *binder) pop() { b.path = b.path[:len(b.path)-1] }

// add records a problem with the value at the current path.
func (b *binder) add(expected, received string, valid []string) {
	path := pathString(b.path)
	if b.root != nil && received != "nothing" && sensitiveAt(b.root, b.path) {
		// "nothing" (a missing value) quotes nothing: it stays, so that
		// the model learns what is missing.
		received = redacted
	}
	if b.paths == nil {
		b.paths = map[string]bool{}
	}
	b.paths[path] = true
	b.problems = append(b.problems, Problem{Path: path, Expected: expected, Received: received, Valid: valid})
}

// repair fixes what can be fixed without loss, in place where it can, and
// records what cannot. It returns the repaired value.
func (b *binder) repair(p *plan, v any) any {
	p = p.resolve()
	if p == nil || p.opaque {
		return v
	}
	if p.types&tArray != 0 && p.items != nil && p.types&jsonType(v) == 0 {
		if e, ok := b.repairSingle(p, v); ok {
			return e
		}
	}
	switch x := v.(type) {
	case string:
		if p.types == 0 || p.types&tString != 0 {
			if len(p.enum) > 0 {
				if declared, changed := b.repairEnum(p, x); changed {
					return declared
				}
			}
			if p.format == "date-time" && isDateOnly(x) {
				b.add("a date-time with a time of day and time zone, such as 2026-11-30T09:00:00Z", received(x)+", a date without a time of day and time zone, which would have to be guessed", nil)
			}
			return v
		}
		s := strings.TrimSpace(x)
		if p.types&(tObject|tArray) != 0 && s != "" && (s[0] == '{' || s[0] == '[' || s[0] == '`') {
			// An object or array double-encoded as a string.
			inner, tp := parseLenient([]byte(s))
			if tp != nil && tp.received != "" && !strings.HasPrefix(tp.received, "text that is not JSON") {
				b.addText(tp)
				return v
			}
			switch inner.(type) {
			case map[string]any:
				if p.types&tObject != 0 {
					return b.repair(p, inner)
				}
			case []any:
				if p.types&tArray != 0 {
					return b.repair(p, inner)
				}
			}
		}
		if p.types&(tInteger|tNumber) != 0 {
			if isJSONNumber(s) {
				if !spec.NumberFits(s) {
					b.add(hugeNumberExpected, received(x), nil)
					return v
				}
				return b.repair(p, json.Number(s))
			}
			if refused := b.refuseNumberText(p, x, s); refused {
				return v
			}
		}
		if p.types&tBoolean != 0 {
			switch strings.ToLower(s) {
			case "true":
				return true
			case "false":
				return false
			}
			b.add("a boolean (true or false)", received(x), nil)
		}
		return v
	case json.Number:
		if p.types&tInteger != 0 && p.types&tNumber == 0 {
			c, verdict := integerText(string(x))
			switch verdict {
			case notIntegral:
				b.add("an integer", received(x), nil)
				return v
			case tooLarge:
				b.add("an integer in range", received(x), nil)
				return v
			}
			if c != string(x) {
				return json.Number(c)
			}
		}
		return v
	case map[string]any:
		if p.types == 0 || p.types&tObject != 0 {
			b.repairObject(p, x)
		}
		return v
	case []any:
		if p.items != nil && (p.types == 0 || p.types&tArray != 0) {
			for i, e := range x {
				b.push("", i)
				x[i] = b.repair(p.items, e)
				b.pop()
			}
		}
		return v
	}
	return v
}

// repairEnum returns the declared spelling of s, and whether it differs:
// the letter case, and space around the value, are repaired.
func (b *binder) repairEnum(p *plan, s string) (string, bool) {
	for _, e := range p.enum {
		if e == s {
			return s, false
		}
	}
	t := strings.TrimSpace(s)
	if t != s {
		for _, e := range p.enum {
			if e == t {
				return t, true
			}
		}
	}
	if p.enumFold != nil {
		if declared, ok := p.enumFold[strings.ToLower(t)]; ok {
			return declared, true
		}
	}
	b.add("one of "+listValues(p.enum), received(s), nil)
	return s, false
}

// jsonType is the type of a parsed JSON value, as a set: a number is both
// an integer and a number, since whether it is integral is repair's to
// judge.
func jsonType(v any) typeSet {
	switch v.(type) {
	case map[string]any:
		return tObject
	case []any:
		return tArray
	case string:
		return tString
	case json.Number:
		return tInteger | tNumber
	case bool:
		return tBoolean
	case nil:
		return tNull
	}
	return 0
}

// repairSingle wraps a single value in an array, where an array of that
// value's type is expected. A string that holds an array is left to the
// double-encoding repair.
func (b *binder) repairSingle(p *plan, v any) (any, bool) {
	if v == nil {
		return nil, false
	}
	if s, ok := v.(string); ok && strings.HasPrefix(strings.TrimSpace(s), "[") {
		return nil, false
	}
	ip := p.items.resolve()
	if ip == nil || ip.opaque || ip.types == 0 {
		return nil, false
	}
	if ip.types&jsonType(v) == 0 && !scalarText(ip, v) {
		return nil, false
	}
	b.push("", 0)
	e := b.repair(p.items, v)
	b.pop()
	return []any{e}, true
}

// scalarText reports whether v is a string that the repair of an item of
// plan ip turns into the item's type: "8" for an integer, "true" for a
// boolean. A single such value is wrapped like 8 or true would be.
func scalarText(ip *plan, v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	s = strings.TrimSpace(s)
	switch {
	case ip.types&(tInteger|tNumber) != 0 && isJSONNumber(s):
		return true
	case ip.types&tBoolean != 0:
		l := strings.ToLower(s)
		return l == "true" || l == "false"
	}
	return false
}

// refuseNumberText records why a string that is no JSON number is refused
// for a number, where the reason is more than its type: thousands
// separators, whose meaning depends on the locale, and NaN or Infinity,
// which JSON cannot carry. It reports whether it recorded a problem.
func (b *binder) refuseNumberText(p *plan, x, s string) bool {
	what := "a number"
	if p.types&tNumber == 0 {
		what = "an integer"
	}
	switch {
	case hasThousandsSeparator(s):
		b.add(what+" written without thousands separators", received(x)+", which is one number in one locale and another in the next", nil)
		return true
	case isNonFinite(s):
		b.add("a finite number", received(x)+", which JSON cannot carry", nil)
		return true
	}
	return false
}

// thousands matches digits grouped by threes with commas, dots,
// apostrophes, spaces or underscores, such as 15,000 or 1.234.567,50.
var thousands = regexp.MustCompile(`^[-+]?[0-9]{1,3}(?:[,.' _][0-9]{3})+(?:[.,][0-9]+)?$`)

func hasThousandsSeparator(s string) bool { return thousands.MatchString(s) }

func isNonFinite(s string) bool {
	switch strings.TrimLeft(strings.ToLower(s), "+-") {
	case "nan", "inf", "infinity":
		return true
	}
	return false
}

// isDateOnly reports whether s is a date with no time: 2026-11-30.
func isDateOnly(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, c := range []byte(s) {
		if i != 4 && i != 7 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// addText records a problem found in the text of a value at the current
// path.
func (b *binder) addText(tp *textProblem) {
	n := len(b.path)
	b.path = append(b.path, tp.path...)
	b.add(tp.expected, tp.received, nil)
	b.path = b.path[:n]
}

// wrapperNames are the names a model wraps arguments in.
var wrapperNames = [...]string{"arguments", "input", "parameters"}

// unwrap returns the object inside a lone wrapper name, such as
// {"arguments": {...}}, when the tool has no argument of that name and
// every name inside is one of the tool's. Otherwise it returns v.
func unwrap(p *plan, v any) any {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return v
	}
	p = p.resolve()
	if p == nil || p.opaque || len(p.props) == 0 {
		return v
	}
	for k, inner := range m {
		wrapper := false
		for _, w := range wrapperNames {
			wrapper = wrapper || strings.EqualFold(k, w)
		}
		if !wrapper || p.props[k] != nil || p.fold[strings.ToLower(k)] != "" {
			return v
		}
		if s, ok := inner.(string); ok {
			var tp *textProblem
			if inner, tp = parseLenient([]byte(s)); tp != nil {
				return v
			}
		}
		im, ok := inner.(map[string]any)
		if !ok || len(im) == 0 && len(p.required) > 0 {
			return v
		}
		for name := range im {
			if p.props[name] == nil && p.fold[strings.ToLower(name)] == "" {
				return v
			}
		}
		return im
	}
	return v
}

func (b *binder) repairObject(p *plan, m map[string]any) {
	var renames [][2]string
	for k, v := range m {
		if cp, ok := p.props[k]; ok {
			b.push(k, -1)
			m[k] = b.repair(cp, v)
			b.pop()
			continue
		}
		// A name in another letter case is renamed only where unknown names
		// are refused: in an open object it may be a property of its own.
		if name, ok := p.fold[strings.ToLower(k)]; ok && p.closed {
			if _, taken := m[name]; !taken {
				renames = append(renames, [2]string{k, name})
				continue
			}
		}
		b.push(k, -1)
		if p.closed {
			got := "unknown name " + strconv.Quote(cut(k, maxReceived))
			if near := nearest(k, p.names); near != "" {
				got += " (did you mean " + strconv.Quote(near) + "?)"
			}
			b.add("a known argument name", got, p.names)
		} else if p.extra != nil {
			m[k] = b.repair(p.extra, v)
		}
		b.pop()
	}
	for _, r := range renames {
		v := m[r[0]]
		delete(m, r[0])
		b.push(r[1], -1)
		m[r[1]] = b.repair(p.props[r[1]], v)
		b.pop()
	}
	for _, name := range p.names {
		cp := p.props[name].resolve()
		v, present := m[name]
		required := p.isRequired(name)
		if present && v == nil && p.props[name].nullAsMissing && !isNullable(p.props[name]) {
			// The schema refuses null here, unless its tag says that null
			// means "not given": then its default applies.
			delete(m, name)
			present = false
		}
		if present {
			continue
		}
		if def, ok := defaultOf(p.props[name]); ok {
			m[name] = cloneValue(def)
			continue
		}
		if !required && cp != nil && cp.nestedDefaults && cp.types == tObject && !isNullable(p.props[name]) && fillable(cp) {
			// An object left out whose members have defaults: made, so
			// that they apply, as encoding/json's zero value would not.
			obj := map[string]any{}
			b.push(name, -1)
			b.repairObject(cp, obj)
			b.pop()
			m[name] = obj
			continue
		}
		if required {
			b.push(name, -1)
			b.add(p.props[name].describe()+" (required)", "nothing", nil)
			b.pop()
		}
	}
	// A required name without a property schema is still required.
	for _, name := range p.required {
		if _, ok := p.props[name]; ok {
			continue
		}
		if _, present := m[name]; !present {
			b.push(name, -1)
			b.add("a value (required)", "nothing", nil)
			b.pop()
		}
	}
}

// cloneValue deep-copies a default, so that a tool that modifies its
// arguments cannot change the default of later calls.
func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneValue(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = cloneValue(e)
		}
		return s
	}
	return v
}

// received renders a value for an error message, bounded in length.
func received(v any) string {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case nil:
		return "null"
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "a value"
		}
		s = string(b)
	}
	if len(s) > maxReceived {
		cut := maxReceived
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// validate checks the repaired arguments against the compiled schema and
// records every failure that repair did not already report.
func (b *binder) validate(sch *jsonschema.Schema, root *plan, v any) {
	err := sch.Validate(v)
	if err == nil {
		return
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		b.problems = append(b.problems, Problem{Path: "$", Expected: "valid arguments", Received: err.Error()})
		return
	}
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		causes := e.Causes
		if _, ok := e.ErrorKind.(*kind.AnyOf); ok {
			// A nullable value that is not null: what is wrong is in the
			// other branch, not that it is not null.
			var kept []*jsonschema.ValidationError
			for _, c := range causes {
				if t, ok := c.ErrorKind.(*kind.Type); !ok || len(c.Causes) > 0 || !slices.Equal(t.Want, []string{"null"}) {
					kept = append(kept, c)
				}
			}
			if len(kept) > 0 {
				causes = kept
			}
		}
		for _, c := range causes {
			walk(c)
		}
	}
	walk(ve)
	for _, e := range leaves {
		path := jsonPath(e.InstanceLocation)
		if b.covered(path) {
			continue
		}
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			if planCovers(root, e.InstanceLocation) {
				continue // repair reported it, with the field's type
			}
			for _, m := range k.Missing {
				b.problems = append(b.problems, Problem{Path: jsonPath(append(slices.Clone(e.InstanceLocation), m)), Expected: "a value (required)", Received: "nothing"})
			}
			continue
		case *kind.AdditionalProperties:
			if planCovers(root, e.InstanceLocation) {
				continue
			}
			for _, name := range k.Properties {
				b.problems = append(b.problems, Problem{Path: jsonPath(append(slices.Clone(e.InstanceLocation), name)), Expected: "a known argument name", Received: "unknown name " + strconv.Quote(name)})
			}
			continue
		}
		got := received(valueAt(v, e.InstanceLocation))
		if b.root != nil && sensitiveAtLoc(b.root, e.InstanceLocation) {
			got = redacted
		}
		b.problems = append(b.problems, Problem{Path: path, Expected: expected(e.ErrorKind), Received: got})
	}
}

// covered reports whether path, or a value that holds it, already has a
// problem: one message per mistake.
//
// It looks up each prefix of path that ends before a step, not each path
// with a problem: linear in the path, where a scan of the problems made
// a body of 100,000 bad numbers quadratic (minutes of CPU).
func (b *binder) covered(path string) bool {
	if len(b.paths) == 0 {
		return false
	}
	for i := 1; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && b.paths[path[:i]] {
			return true
		}
	}
	return b.paths[path]
}

// planCovers reports whether the plan reaches the object at loc, so that
// repair has already checked its required and unknown names.
func planCovers(root *plan, loc []string) bool {
	p := root.resolve()
	for _, tok := range loc {
		if p == nil || p.opaque {
			return false
		}
		switch {
		case p.props != nil && p.props[tok] != nil:
			p = p.props[tok].resolve()
		case p.items != nil:
			p = p.items.resolve()
		case p.extra != nil:
			p = p.extra.resolve()
		default:
			return false
		}
	}
	return p != nil && !p.opaque && (p.closed || p.required != nil || p.props != nil)
}

func jsonPath(loc []string) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, tok := range loc {
		if n, err := strconv.Atoi(tok); err == nil && n >= 0 {
			writeStep(&b, "", n)
		} else {
			writeStep(&b, tok, -1)
		}
	}
	return b.String()
}

func valueAt(v any, loc []string) any {
	for _, tok := range loc {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// expected says in words what a schema keyword wanted.
func expected(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		want := k.Want
		if i := slices.Index(want, "null"); i >= 0 && len(want) > 1 {
			// "an array or null" reads better than "a null or array".
			want = append(slices.Delete(slices.Clone(want), i, i+1), "null")
		}
		return article(want[0]) + strings.Join(want, " or ")
	case *kind.Enum:
		return "one of " + listValues(k.Want)
	case *kind.Const:
		return "exactly " + received(k.Want)
	case *kind.Format:
		return "a valid " + k.Want + " string"
	case *kind.Pattern:
		return "a string matching " + k.Want
	case *kind.MinLength:
		return fmt.Sprintf("at least %d characters", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("at most %d characters", k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("at least %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("at most %d items", k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("unique items (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1])
	case *kind.Minimum:
		return "a number >= " + k.Want.RatString()
	case *kind.Maximum:
		return "a number <= " + k.Want.RatString()
	case *kind.ExclusiveMinimum:
		return "a number > " + k.Want.RatString()
	case *kind.ExclusiveMaximum:
		return "a number < " + k.Want.RatString()
	case *kind.MultipleOf:
		return "a multiple of " + k.Want.RatString()
	case *kind.MinProperties:
		return fmt.Sprintf("at least %d properties", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("at most %d properties", k.Want)
	case *kind.FalseSchema:
		return "no value here"
	}
	return k.LocalizedString(printer)
}

// sortProblems orders problems by path, so that the same mistakes always
// give the same message.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
}

var printer = message.NewPrinter(language.English)

// nearest returns the name closest to s by edit distance, if one is close
// enough to be a likely misspelling (at most a third of its length, and at
// most 3 edits), or "".
func nearest(s string, names []string) string {
	best, bestD := "", 0
	for _, n := range names {
		d := editDistance(strings.ToLower(s), strings.ToLower(n))
		if limit := min(3, max(1, len(n)/3)); d <= limit && (best == "" || d < bestD) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b, in
// bytes: Levenshtein plus the swap of two neighbours, the commonest typo.
// Names are short, and it runs only for an unknown name.
func editDistance(a, b string) int {
	// Row i lives in rows[i%3]: the current row, the one before, and the
	// one before that (for swaps).
	var rows [3][]int
	for k := range rows {
		rows[k] = make([]int, len(b)+1)
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur, prev, pp := rows[i%3], rows[(i+2)%3], rows[(i+1)%3]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
	}
	return rows[len(a)%3][len(b)]
}
