package specreport

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// recorder is a testing.T that keeps what the suite reports, so that this
// package's own suite can fail on purpose.
type recorder struct {
	failed bool
	logs   []string
}

func (r *recorder) Fail()   { r.failed = true }
func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

var _ = ginkgo.It("passes", func() {})

var _ = ginkgo.It("fails with a long message", func() {
	Expect("the reason " + strings.Repeat("x", 4000)).To(BeEmpty())
})

func TestRunSpecsEndsWithTheFailuresDigest(t *testing.T) {
	RegisterFailHandler(ginkgo.Fail)
	r := &recorder{}
	if RunSpecs(r, "specreport") {
		t.Fatal("the suite passed; one of its specs fails")
	}
	if !r.failed {
		t.Fatal("the suite did not fail its testing.T")
	}
	if len(r.logs) != 1 {
		t.Fatalf("want one digest line for one failed spec, got %d: %q", len(r.logs), r.logs)
	}
	got := r.logs[0]
	for _, want := range []string{`"fails with a long message"`, "specreport_test.go:", "the reason xxx", "… (cut)"} {
		if !strings.Contains(got, want) {
			t.Errorf("digest lacks %q:\n%s", want, got)
		}
	}
	if len(got) > messageBytes+300 {
		t.Errorf("digest is %d bytes, want the message cut near %d", len(got), messageBytes)
	}
}

func TestDigestCutsBetweenCharacters(t *testing.T) {
	// "é" is two bytes: one more byte of "x" puts one across the cut.
	for _, pad := range []int{0, 1} {
		message := strings.Repeat("x", pad) + strings.Repeat("é", messageBytes)
		got := digest(message)
		if !utf8.ValidString(got) {
			t.Errorf("pad %d: the digest is not valid UTF-8: …%q", pad, got[len(got)-20:])
		}
		if body := strings.TrimSuffix(got, "… (cut)"); len(body) > messageBytes || len(body) < messageBytes-3 || !strings.HasPrefix(message, body) {
			t.Errorf("pad %d: cut at %d bytes, want the start of the message, within a character of %d", pad, len(body), messageBytes)
		}
	}
}
