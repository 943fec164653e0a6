// Package search ranks the tools of a toolplane table for a task written in
// plain words, so that an agent facing thousands of tools reads the few it
// needs instead of the whole table.
//
// # Building and following an index
//
// [New] builds an [Index] over one table's tools; it is immutable and safe
// for concurrent use, so one index serves every request of a table
// revision. [Index.Update] makes the index of the next revision from the
// last one.
//
// # Ranking
//
// Ranking is BM25F over the fields of a tool definition, each weighted and
// length-normalized on its own: the published name (split on _ . - and
// camelCase), the title, the description, the input schema's property
// names, their descriptions and enum values, and tags (annotations as
// words, the _meta category [CategoryMeta], the ToolSet's name). Text is
// split into words, lowercased, stripped of English stop words and stemmed
// with the Snowball (Porter2) English stemmer.
//
// # Filtering
//
// A [Filter] keeps tools by namespace, ToolSet, annotations and category,
// and by the caller's own rule ([Filter].Allow), which is asked about
// candidates best first, only until the limit is reached.
package search
