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
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	if exp != "" {
		e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			if isZeroMantissa(mant) {
				return "0", isInteger
			}
			if err == nil && e < 0 || strings.HasPrefix(exp, "-") {
				return "", notIntegral
			}
			return "", tooLarge
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", notIntegral
	}
	if !r.IsInt() {
		return "", notIntegral
	}
	c := r.Num().String()
	if len(strings.TrimPrefix(c, "-")) > maxIntegerDigits {
		return "", tooLarge
	}
	return c, isInteger
}

func isZeroMantissa(m string) bool {
	for _, c := range m {
		if c >= '1' && c <= '9' {
			return false
		}
	}
	return true
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
