package search

import "strings"

// Query expansion: users ask in their words, tool definitions use an API's.
// A query term that belongs to one of these groups also searches for the
// group's other words, at expansionWeight of its own weight, as one
// concept with it: a document scores by the best of them (Index.score).
// The groups are
// general vocabulary of software and operations (the verbs of CRUD APIs,
// the nouns of code hosting, issue tracking and infrastructure), not the
// words of any one server; an abbreviation maps to the words it stands for.
// Documents are indexed as they are, so the groups can change without a
// rebuild's cost beyond a new binary.
var expansionWeight float32 = 0.8

// ownerWeight is the weight of a query word as a ToolSet's name.
var ownerWeight float32 = 1.5

// exactWeight is the weight of a query's words as written.
var exactWeight float32 = 0.3

var synonymGroups = []string{
	"create new add make generate setup",
	"delete remove drop erase destroy purge discard trash rid",
	"list show display enumerate view",
	"find search look locate lookup discover",
	"get fetch retrieve read obtain",
	"update change modify edit alter set",
	"run execute launch trigger kick invoke",
	"stop halt terminate kill cancel abort end",
	"copy duplicate clone fork",
	"move transfer relocate",
	"comment note reply remark",
	"issue ticket bug",
	"folder directory dir",
	"repo repository",
	"picture image screenshot photo",
	"error exception crash failure fail",
	"alert monitor alarm",
	"sprint cycle iteration",
	"deploy ship release rollout",
	"schedule plan",
	"user account person people member",
	"email mail",
	"chart graph plot diagram visualize draw",
	"web internet online",
	"website site",
	"doc document documentation docs",
	"size big large storage",
	"count number many",
	"status state health",
	"permission access allow permit role",
	"rollback revert undo",
	"approve approval",
	"link url",
	"env environment variable",
	"compress gzip zip",
	"upload attach attachment",
	"download export",
	"price cost pricing",
	"place location address",
	"secret password credential",
	"database db",
	"record row entry",
	"column field property attribute",
	"tag label",
	"close shut",
	"subtask sub child",
	"dependency depend block",
	"log logs",
	"pod container",
	"text type",
	"navigate go visit",
	"website page",
}

// abbreviations expand to the words they stand for, at full weight.
var abbreviations = map[string]string{
	"pr":   "pull request",
	"prs":  "pull request",
	"mr":   "merge request",
	"mrs":  "merge request",
	"k8s":  "kubernetes",
	"vm":   "virtual machine",
	"vms":  "virtual machine",
	"db":   "database",
	"ci":   "pipeline",
	"repo": "repository",
	"dm":   "direct message",
	"url":  "link",
	"gh":   "github",
}

// qterm is a query term with its weight.
type qterm struct {
	term string
	w    float32
	// syn is the index in the query of the term this one is a synonym of,
	// plus one; 0 for a term of its own.
	syn int
}

// expansions maps a stemmed term to the stemmed terms it also searches for.
var expansions, abbrevTerms = expansionsOf(synonymGroups)

// expansionsOf stems groups and the abbreviations into expansions and
// abbrevTerms.
func expansionsOf(groups []string) (map[string][]string, map[string][]string) {
	a := newAnalyzer()
	stemOf := func(w string) string {
		var out string
		a.terms(w, func(t string) { out = t })
		return out
	}
	exp := map[string][]string{}
	for _, g := range groups {
		var stems []string
		for _, w := range strings.Fields(g) {
			if s := stemOf(w); s != "" {
				stems = append(stems, s)
			}
		}
		for _, s := range stems {
			for _, o := range stems {
				if o != s && !contains2(exp[s], o) {
					exp[s] = append(exp[s], o)
				}
			}
		}
	}
	abbr := map[string][]string{}
	for k, v := range abbreviations {
		var stems []string
		a.terms(v, func(t string) { stems = append(stems, t) })
		abbr[k] = stems
	}
	return exp, abbr
}

func contains2(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// expand adds the expansions of terms, each once, below every term the
// query holds itself.
func expand(terms, raw []string) []qterm {
	out := make([]qterm, 0, 2*len(terms))
	has := make(map[string]int, 8*len(terms))
	add := func(t string, w float32, syn int) {
		if i, ok := has[t]; ok {
			out[i].w = max(out[i].w, w)
			return
		}
		if len(out) >= 4*maxQueryTerms {
			return
		}
		has[t] = len(out)
		out = append(out, qterm{t, w, syn})
	}
	for _, t := range terms {
		add(t, 1, 0)
	}
	for _, t := range terms {
		for _, a := range abbrevTerms[t] {
			add(a, 1, 0)
		}
	}
	// A word of the query that names a ToolSet (a product, usually)
	// favours its tools.
	for _, t := range terms {
		add(ownerTerm(t), ownerWeight, 0)
	}
	for _, w := range raw {
		add(exactTerm(w), exactWeight, 0)
	}
	for i, t := range terms {
		for _, e := range expansions[t] {
			add(e, expansionWeight, i+1)
		}
	}
	for i, t := range terms {
		related(t, func(e string) { add(e, wordnetWeight, i+1) })
	}
	return out
}
