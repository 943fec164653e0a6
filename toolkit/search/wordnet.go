package search

import (
	_ "embed"
	"sort"
	"strings"
	"sync"
)

// The general thesaurus: a query word also searches for its relatives in
// WordNet (synonyms of its most frequent senses, their derivationally
// related forms and attributes: car → automobile, complete → finish, high
// → height) at wordnetWeight, as one concept with the word. It is general
// English, not the vocabulary of any tool or task: wordnet.txt is
// generated from WordNet 3.0 by TestGenerateWordNet, already stemmed, one
// line per stem, sorted.

//go:embed wordnet.txt
var wordnetText string

// wordnetWeight is the weight of a WordNet relative of a query word.
var wordnetWeight float32 = 0.5

// maxRelated bounds the WordNet relatives one query word searches for.
const maxRelated = 8

// wordnetLines is the thesaurus's entries, sorted by stem, each "stem
// related…", parsed on first use.
var wordnetLines = sync.OnceValue(func() []string {
	var lines []string
	for line := range strings.Lines(wordnetText) {
		if line = strings.TrimSuffix(line, "\n"); line != "" && line[0] != '#' {
			lines = append(lines, line)
		}
	}
	return lines
})

// related calls fn for each stem WordNet relates to the stem t, at most
// maxRelated, most frequent senses first.
func related(t string, fn func(string)) {
	lines := wordnetLines()
	i := sort.Search(len(lines), func(i int) bool {
		k, _, _ := strings.Cut(lines[i], " ")
		return k >= t
	})
	if i == len(lines) {
		return
	}
	k, rest, _ := strings.Cut(lines[i], " ")
	if k != t {
		return
	}
	n := 0
	for w := range strings.FieldsSeq(rest) {
		if n == maxRelated {
			return
		}
		fn(w)
		n++
	}
}
