package search

import (
	_ "embed"
	"slices"
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

// wordnetEntries is the thesaurus's entries, sorted by stem: the stems,
// and by each the rest of its line, its relatives. Parsed on first use.
type wordnetEntries struct {
	stems, rest []string
}

var wordnet = sync.OnceValue(func() *wordnetEntries {
	e := &wordnetEntries{}
	for line := range strings.Lines(wordnetText) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		k, rest, _ := strings.Cut(line, " ")
		e.stems = append(e.stems, k)
		e.rest = append(e.rest, rest)
	}
	return e
})

// related calls fn for each stem WordNet relates to the stem t, at most
// maxRelated, most frequent senses first.
func related(t string, fn func(string)) {
	e := wordnet()
	i, ok := slices.BinarySearch(e.stems, t)
	if !ok {
		return
	}
	n := 0
	for w := range strings.FieldsSeq(e.rest[i]) {
		if n == maxRelated {
			return
		}
		fn(w)
		n++
	}
}
