package toolkit

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// constraints is what a field's tags say about its schema, beyond the json
// tag.
type constraints struct {
	title       string
	description string
	pattern     string
	format      string
	def         *string // the default tag's text, when present
	enum        []string
	required    bool
	optional    bool
	uniqueItems bool
	sensitive   bool
	// nullAsMissing takes an explicit null as a field left out, so that
	// its default applies: the schema then refuses null, and repair drops
	// it.
	nullAsMissing bool
	// Numbers are kept as the tag's text and checked with json.Number
	// syntax, so that integer bounds stay exact.
	minimum, maximum, exclusiveMinimum, exclusiveMaximum json.Number
	minLength, maxLength, minItems, maxItems             *uint64
}

// asserts reports whether c constrains a value beyond what its Go type
// says.
func (c *constraints) asserts() bool {
	return c.pattern != "" || c.format != "" || len(c.enum) > 0 || c.uniqueItems ||
		c.minimum != "" || c.maximum != "" || c.exclusiveMinimum != "" || c.exclusiveMaximum != "" ||
		c.minLength != nil || c.maxLength != nil || c.minItems != nil || c.maxItems != nil
}

// bound returns the field of c that the numeric key sets.
func (c *constraints) bound(key string) *json.Number {
	switch key {
	case "minimum":
		return &c.minimum
	case "maximum":
		return &c.maximum
	case "exclusiveMinimum":
		return &c.exclusiveMinimum
	}
	return &c.exclusiveMaximum
}

// count returns the field of c that the counting key sets.
func (c *constraints) count(key string) **uint64 {
	switch key {
	case "minLength":
		return &c.minLength
	case "maxLength":
		return &c.maxLength
	case "minItems":
		return &c.minItems
	}
	return &c.maxItems
}

// parseTags reads a field's description, pattern, default and tool tags.
// description, pattern and default are free text, each in a tag of its own,
// so that commas and semicolons in them need no escaping. The tool tag holds
// the rest as key=value pairs separated by semicolons; a backslash escapes
// a semicolon, a bar or itself.
func parseTags(tag reflect.StructTag) (constraints, error) {
	var c constraints
	if d, ok := tag.Lookup("description"); ok {
		c.description = d
	} else if d, ok := tag.Lookup("jsonschema"); ok {
		// The official MCP Go SDK's tag: its whole value is the description.
		c.description = d
	}
	c.pattern = tag.Get("pattern")
	if d, ok := tag.Lookup("default"); ok {
		c.def = &d
	}
	for _, item := range splitEscaped(tag.Get("tool"), ';') {
		key, value, hasValue := strings.Cut(item, "=")
		key = strings.TrimSpace(key)
		if key == "" {
			continue
		}
		needValue := func() error {
			if !hasValue || value == "" {
				return fmt.Errorf("tool tag %q needs a value", key)
			}
			return nil
		}
		var err error
		switch key {
		case "required":
			c.required = true
		case "optional":
			c.optional = true
		case "sensitive":
			c.sensitive = true
		case "uniqueItems":
			c.uniqueItems = true
		case "nullAsMissing":
			c.nullAsMissing = true
		case "title":
			c.title = unescape(value)
		case "format":
			err = needValue()
			c.format = unescape(value)
		case "enum":
			if err = needValue(); err == nil {
				for _, v := range splitEscaped(value, '|') {
					c.enum = append(c.enum, unescape(v))
				}
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if err = needValue(); err == nil {
				n := json.Number(strings.TrimSpace(value))
				if !isJSONNumber(string(n)) {
					err = fmt.Errorf("tool tag %s=%q is not a number", key, value)
				}
				*c.bound(key) = n
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			if err = needValue(); err == nil {
				var n uint64
				if n, err = strconv.ParseUint(strings.TrimSpace(value), 10, 63); err != nil {
					err = fmt.Errorf("tool tag %s=%q is not a non-negative integer", key, value)
				}
				*c.count(key) = &n
			}
		default:
			err = fmt.Errorf("unknown tool tag key %q", key)
		}
		if err != nil {
			return c, err
		}
	}
	if c.required && c.optional {
		return c, fmt.Errorf("tool tag says both required and optional")
	}
	return c, nil
}

// splitEscaped splits s at sep, skipping separators escaped with a
// backslash. The escapes are kept for unescape.
func splitEscaped(s string, sep byte) []string {
	if s == "" {
		return nil
	}
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isJSONNumber reports whether s is a number in JSON syntax.
func isJSONNumber(s string) bool {
	if s == "" {
		return false
	}
	i := 0
	if s[i] == '-' {
		i++
	}
	if i == len(s) {
		return false
	}
	switch {
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}
