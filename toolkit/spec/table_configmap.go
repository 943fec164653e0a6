package spec

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ConfigMap keys of the tool table. A table is published in one of two
// forms, chosen by its size:
//
//   - Plain: the table's JSON, under [TableKey] in ConfigMap <name>. Used
//     whenever it fits in [MaxTablePartBytes].
//   - Indexed: ConfigMap <name> holds the [TableIndex] under [TableIndexKey]
//     and the first chunk of the gzipped JSON. Further chunks, if any, live in
//     ConfigMaps <name>-1, <name>-2, …, chunk i in <name>-i. Every chunk's
//     key is named by its digest, [TableChunkKey], so a chunk once written
//     never changes.
//
// Every key is distinct across all the ConfigMaps of a table, so an agent can
// mount them all into one directory with a projected volume; the parts that a
// small table does not need are marked optional:
//
//	volumes:
//	- name: tools
//	  projected:
//	    sources:
//	    - configMap: {name: toolplane-tools}
//	    - configMap: {name: toolplane-tools-1, optional: true}
//	    - configMap: {name: toolplane-tools-2, optional: true}
//	    - configMap: {name: toolplane-tools-3, optional: true}
//
// The first ConfigMap holds up to 360 KiB of gzipped JSON, about 2.3 MiB of
// table; each further listed part adds 188 KiB, about 1.2 MiB of table
// (10,000 tools with realistic schemas, 24 MB of JSON, take 19 ConfigMaps;
// before chunks were content-addressed they took 10). List more parts
// than the table needs today: a part the index names but the volume lacks is
// reported as [ErrTablePartMissing], naming the ConfigMap to add. Mount the
// volume as a directory, never with subPath: kubelet does not update subPath
// mounts. [DecodeTable] reads the files of that directory.
//
// Writes are atomic for readers. A publisher adds the chunks of a new
// revision next to those of the current one (a part ConfigMap has room for
// two), then rewrites ConfigMap <name>, the index with its first chunk, in
// one write: the only change in place. Chunks the index no longer names are
// removed only after a grace period, so that a reader that has the previous
// index still finds its chunks. A writer stopped between any two of its
// writes leaves a table that reads back whole, old or new.
//
// A kubelet refreshes each ConfigMap of a projected volume from its own cache,
// so for a while it may project a new index next to a part that does not
// hold the new chunk yet. [DecodeTable] reports such a torn read as
// [ErrTablePartMissing] (or [ErrTableTorn] when a chunk does not match its
// digest), and a reader keeps its last good table until the next update.
//
// Tables written before chunks were content-addressed keyed chunk i as
// [TablePartKey](i), with the revision next to it under
// [TablePartRevisionKey](i); DecodeTable still reads them.
const (
	// TableKey holds the whole table in the plain form.
	TableKey = "tools.json"
	// TableIndexKey holds the [TableIndex] in the indexed form.
	TableIndexKey = "tools.index.json"
)

// tableChunkPrefix starts the key of every chunk, in both key forms.
const tableChunkPrefix = "tools.part-"

// TableChunkKey returns the key of a chunk whose SHA-256 digest is the hex
// string sha256Hex.
func TableChunkKey(sha256Hex string) string { return tableChunkPrefix + sha256Hex }

// TablePartKey returns the key of chunk i of an indexed table as written
// before chunks were content-addressed. [DecodeTable] still reads it.
func TablePartKey(i int) string { return tableChunkPrefix + strconv.Itoa(i) }

// TablePartRevisionKey returns the key that held the table revision next to
// chunk i (i ≥ 1) of an indexed table written with [TablePartKey] keys.
func TablePartRevisionKey(i int) string { return TablePartKey(i) + ".revision" }

// TablePartName returns the name of ConfigMap i of a table published as
// baseName: baseName itself for i == 0, else baseName-i.
func TablePartName(baseName string, i int) string {
	if i == 0 {
		return baseName
	}
	return baseName + "-" + strconv.Itoa(i)
}

// Size limits of the ConfigMap encoding.
const (
	// MaxTablePartBytes bounds the payload of each ConfigMap: the sum of its
	// keys and values as the API server stores them, that is binary values
	// counted in base64.
	MaxTablePartBytes = 512 << 10
	// MaxTableBytes bounds the table's JSON. [EncodeTable] refuses a larger
	// table and [DecodeTable] stops decompressing past it, so a hostile or
	// corrupt part cannot exhaust an agent's memory.
	MaxTableBytes = 64 << 20
	// MaxTableParts bounds the number of chunks of an indexed table.
	MaxTableParts = 64

	// tableFirstChunkBytes is the raw size of chunk 0: its base64 (480 KiB)
	// leaves room for the index of MaxTableParts chunks next to it.
	tableFirstChunkBytes = 360 << 10
	// tableChunkBytes is the raw size of every further chunk: two of them in
	// base64 (501⅓ KiB) fit in one ConfigMap, the current revision's and the
	// next one's.
	tableChunkBytes = 188 << 10
)

// TableEncodingGzip is the only [TableIndex.Encoding] written today: the
// chunks concatenate to the gzipped JSON of the table. DecodeTable also reads
// "identity", chunks of the JSON itself.
const TableEncodingGzip = "gzip"

// Errors of the ConfigMap encoding. They wrap more detail.
var (
	// ErrTableTorn means the parts read belong to different revisions, or a
	// part does not match its digest in the index: retry later.
	ErrTableTorn = errors.New("toolkit: tool table parts are from different revisions")
	// ErrTablePartMissing means the index names a part that was not read:
	// it may not be projected yet, or not mounted at all.
	ErrTablePartMissing = errors.New("toolkit: tool table part missing")
	// ErrTableTooLarge means the table passes [MaxTableBytes] or
	// [MaxTableParts].
	ErrTableTooLarge = errors.New("toolkit: tool table too large")
	// ErrTableMalformed means the files hold no table, or an unreadable one.
	ErrTableMalformed = errors.New("toolkit: malformed tool table")
	// ErrDuplicateTool means two tools of a table share a name.
	ErrDuplicateTool = errors.New("toolkit: duplicate tool name")
)

// TableIndex is the JSON under [TableIndexKey]: what a reader needs to
// reassemble an indexed table and to check that it read one revision whole.
type TableIndex struct {
	// SchemaVersion is always [SchemaVersion].
	SchemaVersion string `json:"schemaVersion"`
	// Revision is the table's revision.
	Revision string `json:"revision"`
	// Encoding is [TableEncodingGzip] or "identity".
	Encoding string `json:"encoding"`
	// Size is the length of the table's JSON once decoded.
	Size int64 `json:"size"`
	// Parts are the chunks in order; their concatenation is the encoded
	// table.
	Parts []TableIndexPart `json:"parts"`
}

// TableIndexPart describes one chunk of an indexed table.
type TableIndexPart struct {
	// ConfigMap is the name of the ConfigMap that holds the chunk.
	ConfigMap string `json:"configMap"`
	// Key is the chunk's key: [TableChunkKey] of its digest (or, in tables
	// written before chunks were content-addressed, [TablePartKey](i)).
	Key string `json:"key"`
	// Size is the chunk's length in bytes.
	Size int `json:"size"`
	// SHA256 is the hex digest of the chunk.
	SHA256 string `json:"sha256"`
}

// TablePart is the payload of one ConfigMap of a table: its name and the
// content of its data and binaryData fields.
type TablePart struct {
	Name       string
	Data       map[string]string
	BinaryData map[string][]byte
}

// StoredSize returns the part's payload size as the API server stores it:
// keys plus values, binary values counted in base64.
func (p TablePart) StoredSize() int {
	n := 0
	for k, v := range p.Data {
		n += len(k) + len(v)
	}
	for k, v := range p.BinaryData {
		n += len(k) + base64.StdEncoding.EncodedLen(len(v))
	}
	return n
}

// EncodeTable returns the ConfigMap payloads of t, published under baseName.
// The first part is the ConfigMap baseName itself; the others, if any, are
// baseName-1, baseName-2, … in order. Each further part holds one chunk
// under its [TableChunkKey]: a publisher adds it to what the ConfigMap holds
// (see [TableKey] for the order of writes); the first part replaces the
// ConfigMap baseName whole.
//
// t's tools are sorted by name (on a copy) and its SchemaVersion and Revision
// are set from them, so identical tools always give byte-identical parts.
// A table whose JSON fits in [MaxTablePartBytes] is published plain, under
// [TableKey]; a larger one is gzipped and, if need be, split into chunks.
// It fails with [ErrDuplicateTool] if two tools share a name and with
// [ErrTableTooLarge] past [MaxTableBytes] or [MaxTableParts].
func EncodeTable(t *Table, baseName string) ([]TablePart, error) {
	return encodeTable(t, baseName, tableLimits{plain: MaxTablePartBytes, first: tableFirstChunkBytes, chunk: tableChunkBytes})
}

// tableLimits lets tests exercise the split form with small tables.
type tableLimits struct{ plain, first, chunk int }

func encodeTable(t *Table, baseName string, lim tableLimits) ([]TablePart, error) {
	if baseName == "" {
		return nil, fmt.Errorf("%w: empty ConfigMap name", ErrTableMalformed)
	}
	raw, revision, err := marshalTable(t)
	if err != nil {
		return nil, err
	}
	if len(TableKey)+len(raw) <= lim.plain {
		return []TablePart{{Name: baseName, Data: map[string]string{TableKey: string(raw)}}}, nil
	}

	var zbuf bytes.Buffer
	// gzip's header is fixed (no name, no time), so equal input gives equal
	// bytes within one Go release; readers rely on digests, not on this.
	zw, _ := gzip.NewWriterLevel(&zbuf, gzip.DefaultCompression)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("compressing tool table: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing tool table: %w", err)
	}
	z := zbuf.Bytes()
	n := 1
	if len(z) > lim.first {
		n += (len(z) - lim.first + lim.chunk - 1) / lim.chunk
	}
	if n > MaxTableParts {
		return nil, fmt.Errorf("%w: %d parts of gzipped JSON, at most %d", ErrTableTooLarge, n, MaxTableParts)
	}

	idx := TableIndex{SchemaVersion: SchemaVersion, Revision: revision, Encoding: TableEncodingGzip, Size: int64(len(raw))}
	parts := make([]TablePart, n)
	for i := range n {
		from, to := 0, min(lim.first, len(z))
		if i > 0 {
			from = lim.first + (i-1)*lim.chunk
			to = min(from+lim.chunk, len(z))
		}
		chunk := z[from:to]
		sum := sha256.Sum256(chunk)
		digest := hex.EncodeToString(sum[:])
		key := TableChunkKey(digest)
		idx.Parts = append(idx.Parts, TableIndexPart{
			ConfigMap: TablePartName(baseName, i), Key: key, Size: len(chunk), SHA256: digest,
		})
		parts[i] = TablePart{Name: TablePartName(baseName, i), BinaryData: map[string][]byte{key: chunk}}
	}
	ib, err := json.Marshal(idx)
	if err != nil {
		return nil, fmt.Errorf("encoding tool table index: %w", err)
	}
	parts[0].Data = map[string]string{TableIndexKey: string(ib)}
	for i, p := range parts {
		s := p.StoredSize()
		if i > 0 {
			// Room for the chunk of the next revision next to it.
			s *= 2
		}
		if s > MaxTablePartBytes {
			// The chunk sizes leave room for the index of MaxTableParts
			// chunks with long names, so this is a bug, not an input error.
			return nil, fmt.Errorf("%w: part %s is %d bytes, at most %d", ErrTableTooLarge, p.Name, s, MaxTablePartBytes)
		}
	}
	return parts, nil
}

// marshalTable returns the canonical JSON of t and its revision. The tools
// are encoded once: their bytes both give the revision and go into the table.
func marshalTable(t *Table) ([]byte, string, error) {
	var tools []TableTool
	if t != nil {
		tools = append(tools, t.Tools...)
	}
	SortTableTools(tools)
	for i := 1; i < len(tools); i++ {
		if tools[i].Name == tools[i-1].Name {
			return nil, "", fmt.Errorf("%w: %q", ErrDuplicateTool, tools[i].Name)
		}
	}
	if tools == nil {
		tools = []TableTool{}
	}
	tb, err := json.Marshal(tools)
	if err != nil {
		return nil, "", fmt.Errorf("encoding tool table: %w", err)
	}
	sum := sha256.Sum256(tb)
	revision := "sha256:" + hex.EncodeToString(sum[:])
	head, _ := json.Marshal(struct {
		SchemaVersion string `json:"schemaVersion"`
		Revision      string `json:"revision"`
	}{SchemaVersion, revision})
	// Splice the tools into the head object: the same bytes json.Marshal
	// gives for the whole Table, without encoding the tools twice.
	raw := make([]byte, 0, len(head)+len(`,"tools":`)+len(tb))
	raw = append(raw, head[:len(head)-1]...)
	raw = append(raw, `,"tools":`...)
	raw = append(raw, tb...)
	raw = append(raw, '}')
	if len(raw) > MaxTableBytes {
		return nil, "", fmt.Errorf("%w: %d bytes of JSON, at most %d", ErrTableTooLarge, len(raw), MaxTableBytes)
	}
	return raw, revision, nil
}

// DecodeTable reads a table from the files of its ConfigMaps, keyed by
// ConfigMap key: typically every file of the directory that a projected
// volume mounts. It reads both forms that [EncodeTable] writes. Files that
// belong to neither form (kubelet's ..data entries, stale parts) are ignored.
//
// A torn read fails with [ErrTableTorn] or [ErrTablePartMissing]; those are
// transient while kubelet catches up. A table whose JSON would pass
// [MaxTableBytes] fails with [ErrTableTooLarge] without being decompressed
// further; anything else unreadable fails with [ErrTableMalformed].
func DecodeTable(files map[string][]byte) (*Table, error) {
	if ib, ok := files[TableIndexKey]; ok {
		return decodeIndexed(ib, files)
	}
	raw, ok := files[TableKey]
	if !ok {
		return nil, fmt.Errorf("%w: neither %s nor %s present", ErrTableMalformed, TableKey, TableIndexKey)
	}
	if len(raw) > MaxTableBytes {
		return nil, fmt.Errorf("%w: %d bytes of JSON, at most %d", ErrTableTooLarge, len(raw), MaxTableBytes)
	}
	return unmarshalTable(raw, "")
}

// DecodeTableParts reads a table from its ConfigMap payloads, as a publisher
// reads back what it wrote. See [DecodeTable].
func DecodeTableParts(parts ...TablePart) (*Table, error) {
	files := make(map[string][]byte)
	for _, p := range parts {
		for k, v := range p.Data {
			files[k] = []byte(v)
		}
		for k, v := range p.BinaryData {
			files[k] = v
		}
	}
	return DecodeTable(files)
}

// ParseTableIndex reads the JSON under [TableIndexKey] and checks what can be
// checked without the chunks: the schema version, the bounds, and that every
// part's key is one a chunk may have.
func ParseTableIndex(b []byte) (*TableIndex, error) {
	var idx TableIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%w: index: %w", ErrTableMalformed, err)
	}
	if idx.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w: index schemaVersion %q, want %q", ErrTableMalformed, idx.SchemaVersion, SchemaVersion)
	}
	if len(idx.Parts) == 0 {
		return nil, fmt.Errorf("%w: index names no parts", ErrTableMalformed)
	}
	if len(idx.Parts) > MaxTableParts {
		return nil, fmt.Errorf("%w: index names %d parts, at most %d", ErrTableTooLarge, len(idx.Parts), MaxTableParts)
	}
	if idx.Size < 0 || idx.Size > MaxTableBytes {
		return nil, fmt.Errorf("%w: index declares %d bytes of JSON, at most %d", ErrTableTooLarge, idx.Size, MaxTableBytes)
	}
	for i, p := range idx.Parts {
		if p.Key != TablePartKey(i) && p.Key != TableChunkKey(p.SHA256) {
			return nil, fmt.Errorf("%w: index part %d has key %q, want %q", ErrTableMalformed, i, p.Key, TableChunkKey(p.SHA256))
		}
	}
	return &idx, nil
}

// Keys returns every key that a reader of idx needs besides [TableIndexKey]:
// the chunks, and in the older form their revisions.
func (idx *TableIndex) Keys() []string {
	keys := make([]string, 0, len(idx.Parts))
	for i, p := range idx.Parts {
		keys = append(keys, p.Key)
		if i > 0 && p.Key == TablePartKey(i) {
			keys = append(keys, TablePartRevisionKey(i))
		}
	}
	return keys
}

func decodeIndexed(ib []byte, files map[string][]byte) (*Table, error) {
	pidx, err := ParseTableIndex(ib)
	if err != nil {
		return nil, err
	}
	idx := *pidx

	chunks := make([]io.Reader, len(idx.Parts))
	var stored int64
	for i, p := range idx.Parts {
		// Chunk 0 shares the index's ConfigMap, so it cannot tear from it.
		// Every other chunk is named by its digest, or in the older form
		// says which revision it belongs to.
		if i > 0 && p.Key == TablePartKey(i) {
			rev, ok := files[TablePartRevisionKey(i)]
			if !ok {
				return nil, fmt.Errorf("%w: %s (ConfigMap %s) for revision %s", ErrTablePartMissing, TablePartRevisionKey(i), p.ConfigMap, idx.Revision)
			}
			if got := strings.TrimSpace(string(rev)); got != idx.Revision {
				return nil, fmt.Errorf("%w: ConfigMap %s has revision %s, index has %s", ErrTableTorn, p.ConfigMap, got, idx.Revision)
			}
		}
		chunk, ok := files[p.Key]
		if !ok {
			return nil, fmt.Errorf("%w: %s (ConfigMap %s) for revision %s", ErrTablePartMissing, p.Key, p.ConfigMap, idx.Revision)
		}
		sum := sha256.Sum256(chunk)
		if len(chunk) != p.Size || hex.EncodeToString(sum[:]) != p.SHA256 {
			return nil, fmt.Errorf("%w: %s (ConfigMap %s) does not match its digest in the index", ErrTableTorn, p.Key, p.ConfigMap)
		}
		chunks[i] = bytes.NewReader(chunk)
		stored += int64(len(chunk))
	}

	r := io.MultiReader(chunks...)
	switch idx.Encoding {
	case TableEncodingGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrTableMalformed, err)
		}
		defer zr.Close()
		r = zr
	case "identity":
	default:
		return nil, fmt.Errorf("%w: unknown encoding %q", ErrTableMalformed, idx.Encoding)
	}
	// Read at most one byte past the declared size: a stream that inflates
	// further is refused at that byte, however far it would go, and reaching
	// the end checks gzip's CRC. Memory follows what the parts really
	// decode to, not what the index claims, so a tiny index that declares
	// the maximum costs a reader nothing; the first allocation assumes a
	// compression ratio of 8, which a real table's gzip comes close to.
	buf := bytes.NewBuffer(make([]byte, 0, min(idx.Size, 8*stored)))
	n, err := buf.ReadFrom(io.LimitReader(r, idx.Size+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTableMalformed, err)
	}
	switch {
	case n > idx.Size:
		return nil, fmt.Errorf("%w: decodes past the %d bytes its index declares", ErrTableMalformed, idx.Size)
	case n < idx.Size:
		return nil, fmt.Errorf("%w: decodes to %d bytes, index declares %d", ErrTableMalformed, n, idx.Size)
	}
	return unmarshalTable(buf.Bytes(), idx.Revision)
}

func unmarshalTable(raw []byte, revision string) (*Table, error) {
	var t Table
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTableMalformed, err)
	}
	if t.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w: schemaVersion %q, want %q", ErrTableMalformed, t.SchemaVersion, SchemaVersion)
	}
	if revision != "" && t.Revision != revision {
		return nil, fmt.Errorf("%w: table has revision %s, index has %s", ErrTableTorn, t.Revision, revision)
	}
	return &t, nil
}
