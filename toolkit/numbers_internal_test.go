package toolkit

import (
	"math/big"
	"strings"
	"testing"
)

// integerTextByRat is integerText as it was, by big.Rat: the reference that
// the digit arithmetic must agree with.
func integerTextByRat(s string) (string, integerVerdict) {
	if !isJSONNumber(s) {
		return "", notIntegral
	}
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0", isInteger
		}
		return s, isInteger
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return "", notIntegral
	}
	c := r.Num().String()
	if len(strings.TrimPrefix(c, "-")) > maxIntegerDigits {
		return "", tooLarge
	}
	return c, isInteger
}

func FuzzIntegerText(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.0", "-0.0", "5.0", "1e3", "1E+3", "1.5", "1.5e1", "100e-2", "1.50",
		"-9223372036854775808.0", "18446744073709551615e0", "18446744073709551616.0", "1e19", "1e20", "99999999999999999999e0",
		"0.0001e4", "0.00010e4", "12e-1", "120e-1", "4.9e-324", "1e308", "0e999", "1e400", "1e-400", "00", "1.", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if i := strings.IndexAny(s, "eE"); i >= 0 && len(s)-i > 4 {
			return // the reference expands large exponents in full
		}
		got, gv := integerText(s)
		want, wv := integerTextByRat(s)
		if gv != wv || got != want {
			t.Fatalf("integerText(%q) = %q, %d; big.Rat gives %q, %d", s, got, gv, want, wv)
		}
	})
}
