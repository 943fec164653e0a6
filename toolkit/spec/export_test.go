package spec

// EncodeTableChunked is EncodeTable with small limits, so that tests reach the
// gzip and split forms with small tables: chunks of at most chunk bytes, and
// segments of JSON scaled down from the production ones in proportion.
func EncodeTableChunked(t *Table, baseName string, plain, chunk int) ([]TablePart, error) {
	return NewTableEncoderChunked(plain, chunk).Encode(t, baseName, TableStored{})
}

// NewTableEncoderChunked returns a TableEncoder with the limits of
// EncodeTableChunked.
func NewTableEncoderChunked(plain, chunk int) *TableEncoder {
	scale := func(n int) int { return max(1, int(int64(n)*int64(chunk)/tableChunkBytes)) }
	return &TableEncoder{lim: tableLimits{
		plain: plain, first: chunk, chunk: chunk,
		segMin: scale(tableSegmentMin), segSpread: scale(tableSegmentSpread), segMax: scale(tableSegmentMax),
		fill: scale(MaxTablePartBytes / 2),
	}}
}

// NameHash exposes the hash that cuts segments.
var NameHash = nameHash
