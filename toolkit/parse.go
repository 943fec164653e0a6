package toolkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// MaxArgumentBytes bounds the arguments [Registry.Call] binds: larger ones
// are refused with an [*ArgumentError] before any parsing.
const MaxArgumentBytes = 1 << 20

// MaxArgumentDepth bounds how deeply the arguments may nest objects and
// arrays (the arguments object itself is depth 1). Deeper arguments are
// refused: no tool's parameters need it, and the cost of deep values falls
// on the server.
const MaxArgumentDepth = 64

var utf8BOM = []byte("\xef\xbb\xbf")

// errTrailing is parseStrict's error for text after the first JSON value.
var errTrailing = errors.New("unexpected data after the JSON value")

// textProblem is a problem found in the text of the arguments, at a path
// relative to the text's own root.
type textProblem struct {
	path     []step
	expected string
	received string
}

// parseArguments parses a model's arguments exactly (numbers stay
// json.Number). No arguments, or null, is an empty object. See
// parseLenient for what is repaired and refused.
func parseArguments(data []byte) (any, *textProblem) {
	// A byte order mark is no content: Windows tools write one.
	data = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(data), utf8BOM))
	if len(data) == 0 || string(data) == "null" {
		return map[string]any{}, nil
	}
	return parseLenient(data)
}

// parseLenient parses strict JSON, and failing that, repairs what can be
// read only one way: a Markdown code fence around the JSON, JWCC (comments
// and trailing commas), Python's True, False and None, and single-quoted
// strings. Whatever the dialect, it refuses duplicate names, bare NaN and
// Infinity, text after the value, and nesting beyond MaxArgumentDepth.
func parseLenient(data []byte) (any, *textProblem) {
	data = unfence(bytes.TrimSpace(data))
	v, err := parseStrict(data)
	if err == nil {
		if p := checkText(data); p != nil {
			return nil, p
		}
		return v, nil
	}
	trailing := errors.Is(err, errTrailing)
	// hujson rewrites in place; keep the caller's bytes intact.
	std, herr := hujson.Standardize(bytes.Clone(data))
	if herr != nil {
		if py, changed := pythonToJSON(data); changed {
			std, herr = hujson.Standardize(py)
		}
	}
	if herr != nil {
		if p := checkText(data); p != nil {
			return nil, p
		}
		if trailing {
			return nil, &textProblem{expected: "one JSON object and nothing after it", received: "text after its end"}
		}
		return nil, &textProblem{expected: "a JSON object of arguments", received: "text that is not JSON (" + err.Error() + ")"}
	}
	if p := checkText(std); p != nil {
		return nil, p
	}
	v, err = parseStrict(std)
	if err != nil {
		return nil, &textProblem{expected: "a JSON object of arguments", received: "text that is not JSON (" + err.Error() + ")"}
	}
	return v, nil
}

func parseStrict(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return v, nil
}

// unfence returns the text inside a Markdown code fence (```json … ```)
// that wraps all of data, or data itself.
func unfence(data []byte) []byte {
	if !bytes.HasPrefix(data, []byte("```")) || len(data) < 6 || !bytes.HasSuffix(data, []byte("```")) {
		return data
	}
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || nl > len(data)-3 {
		return data
	}
	// The info string is a language name, or nothing.
	for _, c := range bytes.TrimSpace(data[3:nl]) {
		if !isWordByte(c) || c == '.' || c == '+' {
			return data
		}
	}
	return bytes.TrimSpace(data[nl+1 : len(data)-3])
}

// pythonToJSON rewrites Python's True, False and None outside strings, and
// single-quoted strings into double-quoted ones. What it makes of a text
// that is neither JSON nor Python (an apostrophe inside a single-quoted
// string, say) fails to parse, and is refused.
func pythonToJSON(data []byte) ([]byte, bool) {
	out := make([]byte, 0, len(data)+8)
	changed := false
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			j := stringEnd(data, i)
			out = append(out, data[i:j]...)
			i = j
		case c == '\'':
			out = append(out, '"')
			j := i + 1
			for ; j < len(data) && data[j] != '\''; j++ {
				switch {
				case data[j] == '\\' && j+1 < len(data):
					if data[j+1] == '\'' {
						out = append(out, '\'')
					} else {
						out = append(out, data[j], data[j+1])
					}
					j++
				case data[j] == '"':
					out = append(out, '\\', '"')
				default:
					out = append(out, data[j])
				}
			}
			if j >= len(data) {
				return nil, false
			}
			out = append(out, '"')
			i, changed = j+1, true
		case isWordByte(c):
			j := i
			for j < len(data) && isWordByte(data[j]) {
				j++
			}
			switch w := string(data[i:j]); w {
			case "True", "False", "None":
				out = append(out, map[string]string{"True": "true", "False": "false", "None": "null"}[w]...)
				changed = true
			default:
				out = append(out, w...)
			}
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	return out, changed
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '+' || c == '-'
}

// stringEnd returns the index just past the string that starts with the
// quote at data[i], or len(data) for an unterminated one.
func stringEnd(data []byte, i int) int {
	q := data[i]
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(data)
}

// scanFrame is an open object or array while checkText walks a text.
type scanFrame struct {
	object   bool
	keyStart int    // where this object's names start in the names stack
	key      []byte // the current member's name, raw
	index    int    // the current element's index
	set      map[string]bool
}

// manyKeys is where checkText switches from comparing an object's names
// one by one to a set, so that a huge object costs linear time.
const manyKeys = 32

// checkText walks JSON text, or text close to it, and returns the first
// problem with its shape: a name given twice in one object, a bare NaN or
// Infinity, a number beyond what a float64 holds (spec.NumberFits), or
// nesting beyond MaxArgumentDepth. It allocates nothing for
// text without a problem and without escapes in names.
func checkText(data []byte) *textProblem {
	var frameBuf [16]scanFrame
	var keyBuf [32][]byte
	frames, keys := frameBuf[:0], keyBuf[:0]
	expectKey := false
	for i := 0; i < len(data); {
		c := data[i]
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			if c == ':' {
				expectKey = false
			}
			i++
		case '/':
			// A comment, in text that is not yet standardized.
			if i+1 < len(data) && data[i+1] == '/' {
				for i < len(data) && data[i] != '\n' {
					i++
				}
			} else if i+1 < len(data) && data[i+1] == '*' {
				end := bytes.Index(data[i+2:], []byte("*/"))
				if end < 0 {
					return nil
				}
				i += end + 4
			} else {
				i++
			}
		case '{', '[':
			if len(frames) >= MaxArgumentDepth {
				return &textProblem{path: framePath(frames), expected: "arguments nested at most " + strconv.Itoa(MaxArgumentDepth) + " levels deep",
					received: "deeper nesting"}
			}
			frames = append(frames, scanFrame{object: c == '{', keyStart: len(keys), index: 0})
			expectKey = c == '{'
			i++
		case '}', ']':
			if len(frames) > 0 {
				keys = keys[:frames[len(frames)-1].keyStart]
				frames = frames[:len(frames)-1]
			}
			expectKey = false
			i++
		case ',':
			if n := len(frames); n > 0 {
				if frames[n-1].object {
					expectKey = true
				} else {
					frames[n-1].index++
				}
			}
			i++
		case '"', '\'':
			j := stringEnd(data, i)
			if n := len(frames); expectKey && n > 0 && frames[n-1].object {
				f := &frames[n-1]
				key := data[i:j]
				if bytes.IndexByte(key, '\\') >= 0 || c == '\'' {
					key = []byte(unquoteName(key))
				} else if len(key) >= 2 {
					key = key[1 : len(key)-1]
				}
				if duplicateName(f, keys[f.keyStart:], key) {
					f.key = key
					return &textProblem{path: framePath(frames), expected: "each argument name once",
						received: strconv.Quote(string(key)) + " more than once (parsers disagree on which one counts)"}
				}
				keys = append(keys, key)
				f.key = key
			}
			i = j
		default:
			j := i
			for j < len(data) && isWordByte(data[j]) {
				j++
			}
			if j == i {
				i++
				continue
			}
			w := string(data[i:j])
			switch strings.TrimLeft(strings.ToLower(w), "+-") {
			case "nan", "infinity", "inf":
				return &textProblem{path: framePath(frames), expected: "a finite number",
					received: w + ", which JSON cannot carry"}
			}
			if !spec.NumberFits(w) {
				return hugeNumber(framePath(frames), w)
			}
			i = j
		}
	}
	return nil
}

// duplicateName reports whether key is among the names of the object f,
// whose names so far are names.
func duplicateName(f *scanFrame, names [][]byte, key []byte) bool {
	if f.set != nil {
		if f.set[string(key)] {
			return true
		}
		f.set[string(key)] = true
		return false
	}
	for _, n := range names {
		if bytes.Equal(n, key) {
			return true
		}
	}
	if len(names) >= manyKeys {
		f.set = make(map[string]bool, 2*len(names))
		for _, n := range names {
			f.set[string(n)] = true
		}
		f.set[string(key)] = true
	}
	return false
}

// unquoteName decodes a quoted name with escapes, or a single-quoted one.
func unquoteName(raw []byte) string {
	if len(raw) >= 2 && raw[0] == '\'' {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return string(raw)
	}
	return s
}

// framePath is the path to the current value of the innermost frame.
func framePath(frames []scanFrame) []step {
	path := make([]step, 0, len(frames))
	for i, f := range frames {
		if f.object {
			if f.key == nil && i == len(frames)-1 {
				break
			}
			path = append(path, step{key: string(f.key), index: -1})
		} else {
			path = append(path, step{index: f.index})
		}
	}
	return path
}

// hugeNumber refuses a number that no Go numeric type holds, such as
// 1e999999, before repair or validation parse it: exact parsing expands it
// in full, and 200 of them cost seconds of CPU.
func hugeNumber(path []step, w string) *textProblem {
	return &textProblem{path: path, expected: hugeNumberExpected, received: received(json.Number(w))}
}

// hugeNumberExpected is what a number must be, for spec.NumberFits.
var hugeNumberExpected = "a number in range (a magnitude from 4.9e-324 to 1.8e308, at most " + strconv.Itoa(spec.MaxNumberDigits) + " significant digits)"
