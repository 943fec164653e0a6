package toolkit

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// redacted stands in for a sensitive value wherever it would be shown.
const redacted = "[redacted]"

// Redacted is what a sensitive value is shown as: "[redacted]".
const Redacted = redacted

// stepOf returns the plan of the member or element that s names, in the
// plan p (already resolved), or nil.
func stepOf(p *plan, key string, index int) *plan {
	if index >= 0 {
		return p.items
	}
	if c := p.props[key]; c != nil {
		return c
	}
	if n, ok := p.fold[strings.ToLower(key)]; ok {
		return p.props[n]
	}
	return p.extra
}

// isSensitive reports whether the value of p, or of the schema p refers
// to, is marked sensitive.
func isSensitive(p *plan) bool {
	for ; p != nil; p = p.ref {
		if p.sensitive {
			return true
		}
	}
	return false
}

// sensitiveAt reports whether the value at path, or a value that holds
// it, is sensitive.
func sensitiveAt(root *plan, path []step) bool {
	p := root
	for _, s := range path {
		if isSensitive(p) {
			return true
		}
		if p = p.resolve(); p == nil || p.opaque {
			return false
		}
		if p.types&tArray != 0 && s.index < 0 && p.items != nil {
			// A single value wrapped into an array: same plan as its element.
			if isSensitive(p.items) {
				return true
			}
		}
		p = stepOf(p, s.key, s.index)
	}
	return isSensitive(p)
}

// sensitiveAtLoc is sensitiveAt for a validator's instance location.
func sensitiveAtLoc(root *plan, loc []string) bool {
	path := make([]step, len(loc))
	for i, tok := range loc {
		path[i] = step{key: tok, index: -1}
		if n, err := strconv.Atoi(tok); err == nil && n >= 0 {
			if p := planAt(root, path[:i]); p != nil && p.items != nil && p.props[tok] == nil {
				path[i] = step{index: n}
			}
		}
	}
	return sensitiveAt(root, path)
}

func planAt(root *plan, path []step) *plan {
	p := root.resolve()
	for _, s := range path {
		if p == nil || p.opaque {
			return nil
		}
		p = stepOf(p, s.key, s.index).resolve()
	}
	return p
}

// collectSecrets appends the sensitive values in v (bound arguments, after
// repair) to out: strings as they are and as JSON writes them, other
// values as their JSON text.
func collectSecrets(p *plan, v any, inside bool, out *[]string) {
	inside = inside || isSensitive(p)
	if inside {
		switch x := v.(type) {
		case string:
			addSecret(out, x)
			return
		case json.Number:
			addSecret(out, string(x))
			return
		}
	}
	if p = p.resolve(); p == nil || p.opaque {
		if !inside {
			return
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			var cp *plan
			if p != nil && !p.opaque {
				cp = stepOf(p, k, -1)
			}
			collectSecrets(cp, e, inside, out)
		}
	case []any:
		for _, e := range x {
			var cp *plan
			if p != nil && !p.opaque {
				cp = p.items
			}
			collectSecrets(cp, e, inside, out)
		}
	}
}

func addSecret(out *[]string, s string) {
	if s == "" {
		return
	}
	*out = append(*out, s)
	if q, err := json.Marshal(s); err == nil {
		if inner := string(q[1 : len(q)-1]); inner != s {
			*out = append(*out, inner)
		}
	}
}

// redactValue replaces the sensitive values in v, a parsed but unrepaired
// argument value, with "[redacted]". It follows the repairs that move a
// value (double-encoding, a name in another case, a single value for an
// array), so that none of them carries a secret past it.
func redactValue(p *plan, v any) any {
	if p == nil {
		return v
	}
	if isSensitive(p) {
		return redacted
	}
	if p = p.resolve(); p == nil || p.opaque {
		return v
	}
	switch x := v.(type) {
	case string:
		if p.types&(tObject|tArray) != 0 && p.types&tString == 0 {
			if inner, tp := parseLenient([]byte(x)); tp == nil {
				return redactValue(p, inner)
			}
			if p.anySensitive || p.types&tArray != 0 && p.items != nil && isSensitive(p.items) {
				return redacted
			}
		}
	case map[string]any:
		if p.types&tObject == 0 && p.types != 0 && p.items != nil {
			return redactValue(p.items, v)
		}
		for k, e := range x {
			x[k] = redactValue(stepOf(p, k, -1), e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = redactValue(p.items, e)
		}
		return x
	}
	if p.types&tArray != 0 && p.items != nil && p.types&jsonType(v) == 0 {
		return redactValue(p.items, v)
	}
	return v
}

// redactArguments returns the arguments of t as JSON with every sensitive
// value replaced, and every secret found while binding scrubbed from the
// rest. Arguments that cannot be read at all are redacted whole.
func redactArguments(t *Tool, raw json.RawMessage, secrets []string) string {
	v, tp := parseArguments(raw)
	if tp != nil {
		return `"` + redacted + `"`
	}
	if s, ok := v.(string); ok {
		if v, tp = parseLenient([]byte(s)); tp != nil {
			return `"` + redacted + `"`
		}
	}
	v = unwrap(t.plan, v)
	b, err := json.Marshal(redactValue(t.plan, v))
	if err != nil {
		return `"` + redacted + `"`
	}
	return scrub(string(b), secrets)
}

// minEmbeddedSecret is the length from which a secret is scrubbed
// wherever it occurs. A shorter one ("x", "ab") is scrubbed only where it
// stands alone, not touching a letter or digit: inside a word it is
// coincidence, and replacing it there would turn "expected" into
// "e[redacted]pected".
const minEmbeddedSecret = 4

// scrub replaces every secret in s, longest first.
func scrub(s string, secrets []string) string {
	if len(secrets) == 0 || s == "" {
		return s
	}
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range secrets {
		if len(sec) >= minEmbeddedSecret {
			s = strings.ReplaceAll(s, sec, redacted)
		} else {
			s = replaceAlone(s, sec)
		}
	}
	return s
}

// replaceAlone replaces the occurrences of sec in s that no letter or
// digit touches.
func replaceAlone(s, sec string) string {
	var b strings.Builder
	for i := 0; ; {
		j := strings.Index(s[i:], sec)
		if j < 0 {
			if b.Len() == 0 {
				return s
			}
			b.WriteString(s[i:])
			return b.String()
		}
		j += i
		end := j + len(sec)
		before, _ := utf8.DecodeLastRuneInString(s[:j])
		after, _ := utf8.DecodeRuneInString(s[end:])
		b.WriteString(s[i:j])
		if wordRune(before) && wordRune(firstRune(sec)) || wordRune(after) && wordRune(lastRune(sec)) {
			b.WriteString(sec)
		} else {
			b.WriteString(redacted)
		}
		i = end
	}
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func firstRune(s string) rune { r, _ := utf8.DecodeRuneInString(s); return r }

func lastRune(s string) rune { r, _ := utf8.DecodeLastRuneInString(s); return r }

// Redact returns s with every sensitive value of this call replaced by
// "[redacted]". Middleware that records what a call returned or failed
// with (a log line, a span status) passes the text through it. The values
// are known once the arguments are bound, so call it after next.
func (r *Request) Redact(s string) string {
	if r == nil {
		return s
	}
	return scrub(s, r.secrets)
}

// RedactedArguments returns the arguments as JSON text with the values of
// sensitive fields (tag tool:"sensitive", or writeOnly in a hand-written
// schema) replaced by "[redacted]". For a tool without sensitive fields it
// returns the arguments as they came, at no cost.
func (r *Request) RedactedArguments() string {
	if r.Tool == nil || !r.Tool.plan.anySensitive {
		return string(r.Arguments)
	}
	return redactArguments(r.Tool, r.Arguments, r.secrets)
}

// redactResult returns a copy of res with the secrets scrubbed from its
// text.
func redactResult(res *spec.CallResult, secrets []string) *spec.CallResult {
	out := *res
	out.Content = slices.Clone(res.Content)
	for i := range out.Content {
		out.Content[i].Text = scrub(out.Content[i].Text, secrets)
	}
	return &out
}

// redactedError is an error whose message has the call's secrets scrubbed,
// and which still matches what it wraps.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactError scrubs err's message, keeping what it matches.
func redactError(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := scrub(err.Error(), secrets)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}
