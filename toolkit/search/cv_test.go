package search

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// param is one ranking parameter that the tuner may move.
type param struct {
	name string
	p    *float32
	vals []float32
}

// tuneParams are the parameters TestTune and TestCrossValidate move, with
// the values they try.
func tuneParams() []param {
	var ps []param
	for f := range numFields {
		ps = append(ps, param{fmt.Sprintf("w%d", f), &fieldWeight[f], []float32{0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.5, 2, 3, 4, 6}},
			param{fmt.Sprintf("b%d", f), &fieldB[f], []float32{0, 0.2, 0.4, 0.6, 0.75, 0.9, 1}})
	}
	return append(ps,
		param{"k1", &bm25K1, []float32{0.6, 0.9, 1.2, 1.6, 2, 3}},
		param{"exp", &expansionWeight, []float32{0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1}},
		param{"owner", &ownerWeight, []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}},
		param{"exact", &exactWeight, []float32{0, 0.1, 0.2, 0.3, 0.4, 0.6}},
		param{"wordnet", &wordnetWeight, []float32{0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9}},
		param{"read", &readBoost, []float32{0, 0.1, 0.2, 0.4, 0.8}})
}

// evalTasks ranks tasks over tb and returns recall at 5 and 10 and MRR.
func evalTasks(tb *spec.Table, tasks []corpusTask) (r5, r10, mrr float64) {
	x := New(tb, nil)
	var at5, at10 int
	var rr float64
	for _, k := range tasks {
		for r, h := range x.Search(context.Background(), k.Task, Filter{Limit: 10}) {
			if n := tb.Tools[h.Index].Name; n == k.Tool || slices.Contains(k.Also, n) {
				rr += 1 / float64(r+1)
				if r < 5 {
					at5++
				}
				at10++
				break
			}
		}
	}
	n := float64(max(1, len(tasks)))
	return float64(at5) / n, float64(at10) / n, rr / n
}

// objective is what the tuner maximizes.
func objective(r5, r10, mrr float64) float64 { return r5 + 0.5*r10 + 0.5*mrr }

// ascend moves ps by coordinate ascent on tasks, at most rounds times.
func ascend(tb *spec.Table, tasks []corpusTask, ps []param, rounds int) float64 {
	best := objective(evalTasks(tb, tasks))
	for range rounds {
		improved := false
		for _, p := range ps {
			bestV := *p.p
			for _, v := range p.vals {
				*p.p = v
				if s := objective(evalTasks(tb, tasks)); s > best+1e-9 {
					best, bestV, improved = s, v, true
				}
			}
			*p.p = bestV
		}
		if !improved {
			break
		}
	}
	return best
}

// tuningHalf is the corpus's tuning tasks, never the held-out ones.
func tuningHalf(tasks []corpusTask) []corpusTask {
	var out []corpusTask
	for _, k := range tasks {
		if k.Split == "tune" {
			out = append(out, k)
		}
	}
	return out
}

// TestCrossValidate estimates how the ranking generalizes without the
// held-out half: the tuning half is cut into folds (by a hash of each
// task's text), the parameters are tuned by coordinate ascent on all folds
// but one and measured on that one, and the measures are averaged. It
// reports the current parameters' figures on the whole tuning half, and
// the cross-validated ones. SEARCH_CV=1 go test -run TestCrossValidate -v ./search/
func TestCrossValidate(t *testing.T) {
	if os.Getenv("SEARCH_CV") == "" {
		t.Skip("set SEARCH_CV=1 to cross-validate")
	}
	tools, tasks := loadCorpus(t)
	tb := &spec.Table{Revision: "cv", Tools: tools}
	tune := tuningHalf(tasks)
	r5, r10, mrr := evalTasks(tb, tune)
	t.Logf("as set, tuning half: r5=%.3f r10=%.3f mrr=%.3f", r5, r10, mrr)
	const folds = 4
	ps := tuneParams()
	orig := make([]float32, len(ps))
	for i, p := range ps {
		orig[i] = *p.p
	}
	var s5, s10, smrr, u5, u10, umrr float64
	chosen := make([][]float32, len(ps)) // by parameter, by fold
	for f := range folds {
		var train, test []corpusTask
		for _, k := range tune {
			if h := sha256.Sum256([]byte(k.Task)); int(h[1])%folds == f {
				test = append(test, k)
			} else {
				train = append(train, k)
			}
		}
		for i, p := range ps {
			*p.p = orig[i]
		}
		a5, a10, amrr := evalTasks(tb, test)
		u5, u10, umrr = u5+a5, u10+a10, umrr+amrr
		if os.Getenv("SEARCH_CV") != "fixed" {
			ascend(tb, train, ps, 3)
		}
		b5, b10, bmrr := evalTasks(tb, test)
		t.Logf("fold %d (%d tasks): as set r5=%.3f r10=%.3f mrr=%.3f; tuned on the rest r5=%.3f r10=%.3f mrr=%.3f", f, len(test), a5, a10, amrr, b5, b10, bmrr)
		s5, s10, smrr = s5+b5, s10+b10, smrr+bmrr
		for i, p := range ps {
			chosen[i] = append(chosen[i], *p.p)
		}
	}
	for i, p := range ps {
		*p.p = orig[i]
	}
	var med []string
	for i, p := range ps {
		v := slices.Clone(chosen[i])
		slices.Sort(v)
		med = append(med, fmt.Sprintf("%s=%v (folds %v)", p.name, (v[(len(v)-1)/2]+v[len(v)/2])/2, chosen[i]))
	}
	t.Logf("median of the folds' choices: %s", strings.Join(med, " "))
	t.Logf("cross-validated: r5=%.3f r10=%.3f mrr=%.3f (as set, per fold: r5=%.3f r10=%.3f mrr=%.3f)", s5/folds, s10/folds, smrr/folds, u5/folds, u10/folds, umrr/folds)
}

// TestEvalTuning prints the tuning half's figures and misses at the
// parameters as set: SEARCH_EVAL=1 go test -run TestEvalTuning -v ./search/
func TestEvalTuning(t *testing.T) {
	if os.Getenv("SEARCH_EVAL") == "" {
		t.Skip("set SEARCH_EVAL=1 to evaluate")
	}
	tools, tasks := loadCorpus(t)
	tb := &spec.Table{Revision: "eval", Tools: tools}
	tune := tuningHalf(tasks)
	r5, r10, mrr := evalTasks(tb, tune)
	t.Logf("tuning half: r5=%.3f r10=%.3f mrr=%.3f", r5, r10, mrr)
	if os.Getenv("SEARCH_EVAL") != "misses" {
		return
	}
	x := New(tb, nil)
	for _, k := range tune {
		hits := x.Search(context.Background(), k.Task, Filter{Limit: 50})
		rank := 0
		var top []string
		for r, h := range hits {
			n := tools[h.Index].Name
			if r < 5 {
				top = append(top, n)
			}
			if rank == 0 && (n == k.Tool || slices.Contains(k.Also, n)) {
				rank = r + 1
			}
		}
		if rank == 0 || rank > 5 {
			t.Logf("miss %d %q want %s got %v", rank, k.Task, k.Tool, top)
		}
	}
}

// TestAblateGroups measures what each group of the built-in thesaurus is
// worth on the tuning half: its figures without that one group, as a
// change of recall at 5 and 10, MRR and the tuner's objective. A group
// worth nothing here was not fitted to the tuning half's misses; one that
// costs something is a candidate for removal.
// SEARCH_ABLATE=1 go test -run TestAblateGroups -v ./search/
func TestAblateGroups(t *testing.T) {
	if os.Getenv("SEARCH_ABLATE") == "" {
		t.Skip("set SEARCH_ABLATE=1 to measure the thesaurus groups")
	}
	tools, tasks := loadCorpus(t)
	tb := &spec.Table{Revision: "ablate", Tools: tools}
	tune := tuningHalf(tasks)
	r5, r10, mrr := evalTasks(tb, tune)
	t.Logf("all groups: r5=%.3f r10=%.3f mrr=%.3f", r5, r10, mrr)
	orig := expansions
	defer func() { expansions = orig }()
	for i, g := range synonymGroups {
		expansions, _ = expansionsOf(slices.Delete(slices.Clone(synonymGroups), i, i+1))
		a5, a10, amrr := evalTasks(tb, tune)
		t.Logf("without %q: r5 %+.3f r10 %+.3f mrr %+.3f objective %+.3f", g, a5-r5, a10-r10, amrr-mrr, objective(a5, a10, amrr)-objective(r5, r10, mrr))
	}
}
