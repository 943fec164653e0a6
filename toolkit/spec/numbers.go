package spec

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxNumberDigits is the most significant digits a JSON number may have for
// [NumberFits]: the exact decimal form of a float64 has at most 767, so
// nothing a Go numeric type holds needs more.
const MaxNumberDigits = 800

// Decimal exponents of the largest float64 (about 1.8e308) and of the
// smallest nonzero one (about 4.9e-324), as the exponent of a number's
// leading digit.
const (
	maxFloatExp = 308
	minFloatExp = -324
)

// NumberFits reports whether s, the text of a JSON number, is one that some
// Go numeric type can hold: zero, or a magnitude from the smallest nonzero
// float64 to the largest, with at most [MaxNumberDigits] significant
// digits. Text that is no JSON number fits: it is not a number, and whoever
// wants one refuses it.
//
// A number that does not fit is one that no caller means, and that costs
// whoever parses it exactly: big.Rat, which JSON Schema validators use for
// exact comparisons, expands 1e999999 in full, some 40ms of CPU for one
// number of 8 bytes. NumberFits reads s once, allocates nothing, and never
// parses its exponent beyond seven digits.
func NumberFits(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intLen := i - intStart
	if intLen == 0 || intLen > 1 && s[intStart] == '0' {
		return true // not a JSON number
	}
	fracStart, fracLen := i, 0
	if i < len(s) && s[i] == '.' {
		i++
		fracStart = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fracLen = i - fracStart
		if fracLen == 0 {
			return true
		}
	}
	exp, expNeg, expHuge := 0, false, false
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		start := i
		for i < len(s) && s[i] == '0' {
			i++
		}
		sig := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return true
		}
		if i-sig > 7 {
			expHuge = true
		} else if i > sig {
			exp, _ = strconv.Atoi(s[sig:i])
		}
	}
	if i != len(s) {
		return true
	}
	// The first nonzero digit, and the significant digits from it.
	digit := func(k int) byte {
		if k < intLen {
			return s[intStart+k]
		}
		return s[fracStart+k-intLen]
	}
	all := intLen + fracLen
	first := 0
	for first < all && digit(first) == '0' {
		first++
	}
	if first == all {
		return true // zero, whatever its exponent
	}
	last := all - 1
	for digit(last) == '0' {
		last--
	}
	if last-first+1 > MaxNumberDigits {
		return false
	}
	if expHuge {
		return false
	}
	if expNeg {
		exp = -exp
	}
	lead := intLen - 1 - first + exp
	switch {
	case lead > maxFloatExp || lead < minFloatExp:
		return false
	case lead == maxFloatExp:
		_, err := strconv.ParseFloat(s, 64)
		return err == nil
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// CheckNumbers returns an error naming the first number in the JSON text
// data that [NumberFits] refuses, and nil when every number fits. It reads
// data once, skipping strings, and allocates only for its error. Text that
// is not JSON is read as far as it goes: its words that look like numbers
// are judged as numbers.
func CheckNumbers(data []byte) error {
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '-' || isDigit(c):
			j := i + 1
			for j < len(data) && isNumberByte(data[j]) {
				j++
			}
			if w := string(data[i:j]); !NumberFits(w) {
				return fmt.Errorf("the number %s is beyond what a 64-bit float holds (about 1.8e308 at most, %d significant digits)", abbreviate(w, 40), MaxNumberDigits)
			}
			i = j
		default:
			i++
		}
	}
	return nil
}

func isNumberByte(c byte) bool {
	return isDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// abbreviate cuts s to at most n bytes, on a rune boundary, and marks the
// cut with an ellipsis and the length, for an error message that quotes
// what a caller sent.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
