// Package specreport runs a Ginkgo suite and ends its output with a short
// digest of the specs that failed: each one's name, where it failed and
// the start of its failure message.
//
// Ginkgo prints a failure where it happens, with everything the spec wrote
// to GinkgoWriter (for the controllers' suite, the manager's whole log), and
// its summary at the end names only the spec and the line. A CI log cut to
// its last lines then keeps the line but not the reason. The digest is
// printed by the test function after the suite, so it is among the last
// lines of its package.
package specreport

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"unicode/utf8"
)

// messageBytes bounds how much of a failure message the digest repeats.
const messageBytes = 1500

// T is what RunSpecs needs of a *testing.T.
type T interface {
	ginkgo.GinkgoTestingT
	Helper()
	Logf(format string, args ...any)
}

// RunSpecs is ginkgo.RunSpecs, followed by the digest of the failures.
// Call it from the suite's test function, as ginkgo.RunSpecs.
func RunSpecs(t T, description string, args ...any) bool {
	t.Helper()
	var failed []types.SpecReport
	ginkgo.ReportAfterSuite("failure digest", func(r ginkgo.Report) {
		for _, s := range r.SpecReports {
			if s.State.Is(types.SpecStateFailureStates) {
				failed = append(failed, s)
			}
		}
	})
	ok := ginkgo.RunSpecs(t, description, args...)
	for _, s := range failed {
		t.Logf("FAILED %s %q at %s:\n%s", s.State, s.FullText(), s.Failure.Location, digest(s.Failure.Message))
	}
	return ok
}

// digest is the start of a failure message, cut at messageBytes, or
// before a character that would straddle it.
func digest(message string) string {
	if len(message) <= messageBytes {
		return message
	}
	cut := messageBytes
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + "… (cut)"
}
