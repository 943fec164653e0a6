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

// NewTableEncoderPacked returns a TableEncoder with the production limits
// but the layout of before tables were spread: segments of 512 KiB to
// 1 MiB whatever the table's size, every member in the base ConfigMap
// when they fit next to the index, and parts filled to half. Benchmarks
// compare against it in the same run.
func NewTableEncoderPacked() *TableEncoder {
	lim := defaultTableLimits
	lim.spread, lim.small = false, [4]int{}
	return &TableEncoder{lim: lim}
}
