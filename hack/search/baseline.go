package main

import (
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// baseline is plain BM25 (k1 = 1.2, b = 0.75) over each tool's name and
// description as one field, with the tokenizer of SQLite FTS5's default,
// unicode61: lowercase runs of letters and digits, no stemming, no stop
// words. It is what a full-text index of tool definitions does out of the
// box (ToolHive's optimizer is FTS5), and the bar that toolkit/search's
// BM25F over the fields of a tool must clear.
type baseline struct {
	post   map[string][]bpost
	lens   []float64
	avgLen float64
}

type bpost struct {
	doc int
	tf  float64
}

func plainTokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func newBaseline(t *spec.Table) *baseline {
	b := &baseline{post: map[string][]bpost{}, lens: make([]float64, len(t.Tools))}
	var sum float64
	for i, tool := range t.Tools {
		toks := plainTokens(tool.Name + " " + tool.Description)
		tf := map[string]float64{}
		for _, w := range toks {
			tf[w]++
		}
		for w, n := range tf {
			b.post[w] = append(b.post[w], bpost{i, n})
		}
		b.lens[i] = float64(len(toks))
		sum += float64(len(toks))
	}
	b.avgLen = sum / float64(max(1, len(t.Tools)))
	return b
}

// search returns the table indexes of the best limit tools.
func (b *baseline) search(q string, limit int) []int {
	const k1, bb = 1.2, 0.75
	n := float64(len(b.lens))
	score := map[int]float64{}
	seen := map[string]bool{}
	for _, w := range plainTokens(q) {
		if seen[w] {
			continue
		}
		seen[w] = true
		post := b.post[w]
		df := float64(len(post))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range post {
			score[p.doc] += idf * p.tf * (k1 + 1) / (p.tf + k1*(1-bb+bb*b.lens[p.doc]/b.avgLen))
		}
	}
	docs := make([]int, 0, len(score))
	for d := range score {
		docs = append(docs, d)
	}
	sort.Slice(docs, func(i, j int) bool {
		if score[docs[i]] != score[docs[j]] {
			return score[docs[i]] > score[docs[j]]
		}
		return docs[i] < docs[j]
	})
	return docs[:min(limit, len(docs))]
}
