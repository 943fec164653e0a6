// Package contract classifies the changes between two versions of a tool
// as compatible or breaking for the agents that call it.
//
// A tool's contract is its input schema, its output schema and its
// annotations; [spec.SchemaDigest] fingerprints it. When the digest of a
// tool changes, [Compare] says what changed, each change with its JSON path
// and in plain words, and whether a caller written against the old version
// may now fail:
//
//   - Input flows from the caller, so a change that rejects input the old
//     schema accepted is breaking: a new required property, a removed or
//     renamed property, a changed or narrowed type, an enum value removed, a
//     tighter bound, a new or changed pattern or format.
//   - Output flows to the caller, so a change that allows output the old
//     schema ruled out is breaking: a removed property, a property no
//     longer required, a widened type, a new enum value, and a property
//     added to an object whose schema had additionalProperties: false
//     (it promised no other property).
//   - Either way, a changed contentEncoding is breaking (toolkit decodes
//     base64 into bytes: a string field that becomes []byte reads the
//     same text as other data), and so is a oneOf that gains or loses an
//     alternative overlapping another (a value that matched one may now
//     match two).
//   - destructiveHint going from false to true, readOnlyHint or
//     idempotentHint going from true to false, and a removed tool
//     ([Removed]) are breaking.
//   - Descriptions, titles, examples and defaults are compatible.
//   - What means the same is no change: true and {} (or a schema of
//     annotations only), a count bound at its neutral value (minLength 0),
//     numbers by value (enum [1] and [1.0]), a bound on integers by the
//     integers it admits (minimum 1 and exclusiveMinimum 0), and the
//     alternatives of anyOf, oneOf and allOf in another order.
//
// Local $refs (#/$defs/…) are followed, so a property is named where it is
// used. A keyword the comparison does not understand, or a change to
// anyOf/oneOf it cannot order, is taken as breaking: the classifier errs
// towards warning.
//
// The operator, the kubectl plugin and agents share this one classifier.
package contract
