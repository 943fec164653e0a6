package spec_test

import (
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestNumberFits(t *testing.T) {
	fits := []string{
		"0", "-0", "1", "-1", "18446744073709551615", "-9223372036854775808", "3.14", "1e308",
		"1.7976931348623157e308", "-1.7976931348623157e308", "4.9e-324", "1e-323", "0e999999999",
		"0.0e-99999999999", "1E+2", "100000000000000000000000e-24", "1" + strings.Repeat("0", 300),
		"0." + strings.Repeat("0", 300) + "1", "0." + strings.Repeat("1", spec.MaxNumberDigits),
		"1" + strings.Repeat("0", 1000) + "e-700", "1.5" + strings.Repeat("0", 2000),
		// Not JSON numbers: judged by whoever wants a number.
		"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "abc", "1x",
	}
	for _, s := range fits {
		if !spec.NumberFits(s) {
			t.Errorf("NumberFits(%.40q) = false, want true", s)
		}
	}
	huge := []string{
		"1e999999", "-1e999999", "1e309", "1.8e308", "10e308", "1e-325", "1e-999999", "2e-400",
		"1e99999999999999999999", "1e-99999999999999999999", "1e0000000000000000000000400",
		strings.Repeat("1", spec.MaxNumberDigits+1), "0." + strings.Repeat("7", spec.MaxNumberDigits+1),
		"1" + strings.Repeat("0", 400), "0." + strings.Repeat("0", 400) + "1",
	}
	for _, s := range huge {
		if spec.NumberFits(s) {
			t.Errorf("NumberFits(%.40q) = true, want false", s)
		}
	}
}

func TestCheckNumbers(t *testing.T) {
	if err := spec.CheckNumbers([]byte(`{"type":"object","properties":{"a":{"minimum":-1.5e300,"maximum":"1e999999","enum":[1,2e3]}}}`)); err != nil {
		t.Errorf("a schema of ordinary numbers, and a huge one inside a string: %v", err)
	}
	err := spec.CheckNumbers([]byte(`{"a":"\"","b":[1, 1e999999]}`))
	if err == nil || !strings.Contains(err.Error(), "1e999999") {
		t.Errorf("got %v, want the huge number named", err)
	}
	long := "9" + strings.Repeat("0", 1<<20)
	err = spec.CheckNumbers([]byte(`[` + long + `]`))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("got %.300v, want a short error", err)
	}
}
