package search

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// maxTokenBytes bounds one token: longer runs (base64, hashes) are cut, so
// that a hostile description cannot make the dictionary hold megabyte keys.
const maxTokenBytes = 48

// words calls fn for each word of s: a run of letters and digits, further
// split at camelCase boundaries ("getHTTPResponse" → get, HTTP, Response)
// and cut at maxTokenBytes. A run split so is also a word whole, after its
// parts ("GitLab" → Git, Lab, GitLab), since a product's name written in
// camelCase is one word to the people who search for it. Separators are
// everything else, so names split on _ . - and spaces alike. Words keep
// their case; fn lowercases.
func words(s string, fn func(w string)) {
	splitWords(s, func(w string, _ bool) { fn(w) })
}

// wholeWords is words without the parts of a split run: how a query is
// read, so that "GitLab" in a task counts once, as the word the tools'
// text holds whole too, and not as "git" and "lab" besides.
func wholeWords(s string, fn func(w string)) {
	splitWords(s, func(w string, part bool) {
		if !part {
			fn(w)
		}
	})
}

// splitWords calls fn for each word of s as words describes, saying of
// each whether it is a part of a longer run that fn also gets whole.
func splitWords(s string, fn func(w string, part bool)) {
	start, run := -1, -1
	split := false
	var prev rune
	cut := func(w string) string {
		if len(w) > maxTokenBytes {
			w = w[:maxTokenBytes]
			for !utf8.ValidString(w) {
				w = w[:len(w)-1]
			}
		}
		return w
	}
	emit := func(end int, last bool) {
		if start >= 0 && end > start {
			fn(cut(s[start:end]), split || !last)
		}
		start = -1
	}
	endRun := func(end int) {
		emit(end, true)
		if split && run >= 0 && end > run {
			fn(cut(s[run:end]), false)
		}
		run, split = -1, false
	}
	for i, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			endRun(i)
			prev = r
			continue
		}
		if start < 0 {
			start, run = i, i
			prev = r
			continue
		}
		switch {
		case unicode.IsLower(prev) && unicode.IsUpper(r):
			// fooBar → foo | Bar
			emit(i, false)
			start, split = i, true
		case unicode.IsUpper(prev) && unicode.IsUpper(r):
			// HTTPServer → HTTP | Server: split before the last capital
			// of a run when a lowercase letter follows it.
			if next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):]); unicode.IsLower(next) && i+utf8.RuneLen(r) < len(s) {
				emit(i, false)
				start, split = i, true
			}
		}
		prev = r
	}
	endRun(len(s))
}

// stopWords are English function words that carry no meaning for finding a
// tool. It is the Snowball English list without the words that do in tool
// descriptions: "not", "only", "up", "down", "off", "all", "before",
// "after", "over", "under", "same", "more", "most", "few", "out", "own".
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above again against am an and any are as at be because been being
		below between both but by can did do does doing don during each for from further had has have having
		he her here hers herself him himself his how i if in into is it its itself just me my myself no nor now
		of on once or other our ours ourselves s she should so some such t than that the their theirs them
		themselves then there these they this those through to too until very was we were what when where which
		while who whom why will with you your yours yourself yourselves would could also may might must shall
		e g eg ie etc please want need like`) {
		m[w] = true
	}
	return m
}()

// stem returns the Snowball (Porter2) English stem of a lowercase word.
// Words with digits are kept whole ("s3", "ec2", "v2").
func stem(w string) string {
	for i := 0; i < len(w); i++ {
		if w[i] >= '0' && w[i] <= '9' {
			return w
		}
	}
	return english.Stem(w, true)
}

// analyzer turns text into index terms: words, lowercased, without stop
// words, stemmed. It memoizes stems, so it is not safe for concurrent use;
// each build has its own.
type analyzer struct {
	stems map[string]string
	// whole reads text as a query: wholeWords rather than words.
	whole bool
}

func newAnalyzer() *analyzer { return &analyzer{stems: make(map[string]string, 1024)} }

// terms calls fn for each term of s.
func (a *analyzer) terms(s string, fn func(term string)) {
	each := words
	if a.whole {
		each = wholeWords
	}
	each(s, func(w string) {
		lw := lower(w)
		if stopWords[lw] {
			return
		}
		fn(a.stem(lw))
	})
}

// stem is the stem of the lowercase word lw, memoized.
func (a *analyzer) stem(lw string) string {
	st, ok := a.stems[lw]
	if !ok {
		st = stem(lw)
		if len(a.stems) < 1<<20 {
			a.stems[strings.Clone(lw)] = st
		}
	}
	return st
}

// lower is strings.ToLower without an allocation for lowercase ASCII.
func lower(w string) string {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(w)
		}
	}
	return w
}

// exactWords calls fn for each word of s as written, lowercased, but for
// stop words: what a plain full-text index holds, without its noise.
func exactWords(s string, fn func(term string)) {
	words(s, func(w string) {
		if lw := lower(w); !stopWords[lw] {
			fn(lw)
		}
	})
}

// exactWholeWords is exactWords of a query, by wholeWords.
func exactWholeWords(s string, fn func(term string)) {
	wholeWords(s, func(w string) {
		if lw := lower(w); !stopWords[lw] {
			fn(lw)
		}
	})
}
