// Package spec defines toolplane's wire formats: the spec document that a
// toolkit workload serves at [DefaultPath], and the tool table that the
// operator publishes and agents read.
//
// Both the toolkit server and the operator use these types, so each format
// is defined exactly once. Encoding is deterministic: the same tools always
// give the same bytes and the same revision.
//
// [EncodeTable] and [DecodeTable] map a tool table to and from the payloads
// of the ConfigMaps it is published in: one plain ConfigMap for a small
// table, and gzipped chunks in several ConfigMaps, each within
// [MaxTablePartBytes], for a large one. See [TableKey] for the layout and for
// how an agent mounts it.
//
// [SchemaDigest] fingerprints a tool's contract with its callers (its
// schemas and annotations, in [CanonicalJSON]); every table entry carries
// it. Package contract, beside this one, says whether a change to that
// contract breaks callers.
package spec
