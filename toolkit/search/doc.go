// Package search ranks the tools of a toolplane table for a task written in
// plain words, so that an agent facing thousands of tools reads the few it
// needs instead of the whole table. It is pure: a table in, ranked table
// indexes out, with no HTTP and no Kubernetes. The gateway's /v1/search and
// /mcp/search and toolkit/discovery's Client.Search are built on it.
//
// # Building and following an index
//
// [New] builds an [Index] over one table's tools. An index is immutable and
// safe for concurrent use, so one serves every request of a table revision.
// [Index.Update] makes the index of the next revision from the last one: a
// tool that kept its name and its searchable content keeps its postings,
// and only added and changed tools are analyzed, into a small delta over
// the last full build, so a one-tool change costs milliseconds where a
// build of 10,000 tools costs a large part of a second. Past a tenth of the
// table changed, Update rebuilds in full.
//
// # Ranking
//
// Ranking is BM25F over the fields of a tool definition, each weighted and
// length-normalized on its own: the published name (split on _ . - and
// camelCase), the title, the description, the input schema's property names,
// their descriptions and enum values, annotations as words and the _meta
// category ([CategoryMeta]), the owner ToolSet's name and namespace (which
// usually name the product, and count apart, so that "in GitLab" favours
// GitLab's tools), and the name and description as written. Text is split
// into words, lowercased, stripped of English stop words and stemmed with
// the Snowball (Porter2) English stemmer (github.com/kljensen/snowball). A
// word in camelCase is split into its parts and kept whole as well
// (getIssueById, GitLab → git, lab, gitlab); a query reads it whole only, so
// that a product's name counts once. A query's URLs stand for the word
// "url", a file's name for its kind of file (logo.png: logo, image file), an
// issue tracker's key (ENG-204) for the word "issue", and its numbers and
// quoted text, the user's data, are not searched for; two words in a row are
// also searched for as one (box plot finds boxplot). A query that asks a
// question ("which pods are failing?") favours the tools whose annotations
// say they only read. A query word also searches for its synonyms in a small
// built-in thesaurus of software vocabulary (delete/remove/drop,
// folder/directory, issue/ticket, sprint/cycle/iteration, …) at a lower
// weight, as one concept with it: a tool scores by the best of a word and
// its synonyms, not their sum, so that one that says "delete" and "remove"
// is not twice the answer to "delete". Abbreviations (PR, MR, k8s, VM)
// search for what they stand for. Past that small thesaurus, a query word
// also searches for its relatives in WordNet 3.0, general English (synonyms
// of its most frequent senses and their derived forms: car → automobile,
// high → height, repay → refund), at a lower weight still and as one concept
// with it too; the table of them (wordnet.txt, about 350 KB, embedded) is
// generated from WordNet by TestGenerateWordNet, not written by hand, and
// nothing of it comes from the tools or tasks of the evaluation corpus.
//
// The ranking is written here rather than taken from a full-text engine:
// what it needs is one small in-memory inverted index with per-field
// weights, which an engine such as Bleve provides only with a document
// store, analyzers and segment files that cost more memory than the index
// itself, and a dependency tree far larger than this module's. Postings hold
// each term's saturated BM25F weight, so a query is a sum over its terms'
// postings into a pooled score array, and the best Limit are taken from the
// documents it touched by a bounded heap, in one comparison for most of them.
//
// # Filtering
//
// A [Filter] keeps tools by namespace, ToolSet, annotations (readOnlyHint,
// destructiveHint, with MCP's defaults) and category, and by the caller's own
// rule ([Filter].Allow): the gateway's permissions. Allow is asked about
// candidates best first, only until Limit are allowed, and never twice about
// one tool, so a search never returns a tool the caller may not call and
// asks about few that it may not.
//
// # The semantic stage
//
// With [Options].Embedder set, for example to an [embedding.OpenAI] client of
// an in-cluster vLLM, TEI or Ollama, [Index.Embed] computes the tools'
// vectors off the request path, caching them per tool text across
// revisions, and a search embeds its query within [Options].EmbedTimeout and
// fuses the semantic ranking with the lexical one by reciprocal rank fusion.
// If the query cannot be embedded in time, the search answers lexically and
// leaves the endpoint alone for a backoff, so an endpoint that is down costs
// searches nothing. It is off by default, and no model is ever fetched.
//
// [embedding.OpenAI]: https://pkg.go.dev/github.com/toolplane/toolplane/toolkit/search/embedding#OpenAI
package search
