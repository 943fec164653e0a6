package spec

// EncodeTableChunked is EncodeTable with small limits, so that tests reach the
// gzip and split forms with small tables.
func EncodeTableChunked(t *Table, baseName string, plain, chunk int) ([]TablePart, error) {
	return encodeTable(t, baseName, tableLimits{plain: plain, first: chunk, chunk: chunk})
}
