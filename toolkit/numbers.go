package toolkit

import (
	"math/big"
	"strconv"
	"strings"
)

// integerVerdict says what a JSON number is as an integer.
type integerVerdict int

const (
	isInteger   integerVerdict = iota
	notIntegral                // has a fractional part
	tooLarge                   // integral, but beyond any integer width toolkit binds
)

// maxExponent bounds the exponents that are expanded exactly: 1e400 is
// larger than any uint64 anyway, and expanding 1e999999999 would cost
// memory a caller controls.
const maxExponent = 400

// maxIntegerDigits is the most digits any integer toolkit binds has
// (uint64's maximum has 20); larger integers are refused as out of range
// without being carried further.
const maxIntegerDigits = 20

// canonicalInteger returns the integer that the JSON number s denotes, in
// plain decimal ("5.0" → "5", "1e3" → "1000", "-0" → "0"), without going
// through float64, so that every int64 and uint64 survives exactly.
func canonicalInteger(s string) (string, bool) {
	c, v := integerText(s)
	return c, v == isInteger
}

func integerText(s string) (string, integerVerdict) {
	if !isJSONNumber(s) {
		return "", notIntegral
	}
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0", isInteger
		}
		return s, isInteger
	}
	// Decided from the digits, never by expanding the number: big.Rat
	// builds 10^308 for 1e308 and 10^324 for 4.9e-324, some 15µs each, and
	// an array of them is a megabyte of arguments.
	neg := s[0] == '-'
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0", isInteger
	}
	e := 0
	if exp != "" {
		v, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
		if err != nil || v > maxExponent || v < -maxExponent {
			if strings.HasPrefix(exp, "-") {
				return "", notIntegral
			}
			return "", tooLarge
		}
		e = v
	}
	// The value is sig × 10^shift, where sig has no trailing zeros.
	sig := strings.TrimRight(digits, "0")
	shift := e - len(frac) + len(digits) - len(sig)
	if shift < 0 {
		return "", notIntegral
	}
	if len(sig)+shift > maxIntegerDigits {
		return "", tooLarge
	}
	c := sig + strings.Repeat("0", shift)
	if neg {
		c = "-" + c
	}
	return c, isInteger
}

// compareNumbers compares two JSON numbers exactly. It is used at
// declaration time only.
func compareNumbers(a, b string) int {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 {
		return strings.Compare(a, b)
	}
	return x.Cmp(y)
}
