// Package spec defines toolplane's wire formats: the spec document that a
// toolkit workload serves at [DefaultPath], and the tool table that the
// operator publishes and agents read.
//
// Both the toolkit server and the operator use these types, so each format
// is defined exactly once. Encoding is deterministic: the same tools always
// give the same bytes and the same revision.
package spec
