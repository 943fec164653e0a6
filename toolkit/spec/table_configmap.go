package spec

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ConfigMap keys of the tool table. A table is published in one of two
// forms, chosen by its size:
//
//   - Plain: the table's JSON, under [TableKey] in ConfigMap <name>. Used
//     whenever it fits in [MaxTablePartBytes].
//   - Indexed: ConfigMap <name> holds the [TableIndex] under [TableIndexKey]
//     and chunk 0 of the gzipped JSON. Further chunks, if any, live in
//     ConfigMaps <name>-1 to <name>-63; the index names the ConfigMap of
//     every chunk. Every chunk's key is named by its digest,
//     [TableChunkKey], so a chunk once written never changes.
//
// The chunks of the indexed form concatenate to one gzip stream of the
// table's JSON, which is all a reader relies on. The writer lays it out so
// that a change to one tool rewrites one chunk: the JSON is cut into
// segments at tool boundaries, chosen by the tools' names (a cut follows a
// tool whose name hashes low, once a segment holds 512 KiB; about 730 KiB
// on average, at most 1 MiB), and each chunk is one gzip member of one
// segment (RFC 1952: members concatenate to one stream). Chunk 0 holds the
// head, with the revision, alone, unless the whole table fits next to the
// index: then chunk 0 is every member, in one ConfigMap. A segment whose
// member passes a chunk's 188 KiB is cut again at a tool, or within a tool
// that alone passes it. A chunk stays in its ConfigMap while the index
// names it. New chunks fill part ConfigMaps to half their size, leaving
// room for replacements, so that parts follow the compressed size; a
// replacement goes next to the chunks of the one it replaces, or to an
// empty part, and in a burst of changes to the emptiest part with room,
// counting chunks in their grace period (see [TableEncoder.Encode]). So a
// change to one tool writes the index and one part ConfigMap (two, rarely,
// when the cut after it moves), a burst of changes waits for a grace period
// only when no part has room, and parts may be numbered with holes.
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
// The first ConfigMap alone holds up to 360 KiB of gzipped JSON, about
// 2.3 MiB of table; a larger table takes a further part per 256 KiB of
// chunks as stored, at least, or per chunk where chunks are larger
// (10,000 tools with realistic schemas, 24 MB of JSON, take 25 ConfigMaps;
// 50,000 small tools of 5,000 ToolSets, 31 MB that compress 30:1, take 5).
// A segment takes a chunk of the 64 an index may name: 32 MiB of realistic
// tools take 46, and a table of more than about 45 MiB of JSON may not fit
// however well it compresses. A chunk stays in its ConfigMap while the table shrinks, and new
// ones go to free parts, but no part is numbered past <name>-63
// (MaxTableParts-1): list more parts than the table needs today, or all 63.
// A part the index names but the volume lacks is reported as
// [ErrTablePartMissing], naming the ConfigMap to add. Mount the volume as a
// directory, never with subPath: kubelet does not update subPath mounts.
// [DecodeTable] reads the files of that directory.
//
// Writes are atomic for readers. A publisher adds the chunks of a new
// revision next to those of the current one, then rewrites ConfigMap
// <name>, the index with its first chunk, in one write: the only change in
// place. Chunks the index no longer names are
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
// The publisher keeps its ledger of the table (since when and why each
// entry's ToolSet owns its name) in ConfigMaps of its own,
// <name>.ledger-<i>-of-<n> (see [TableLedgerChunkKey]), which readers
// neither mount nor read; a table written before them may hold it under
// [TableLedgerKey] in ConfigMap <name>, which readers ignore.
//
// Tables written before chunks were content-addressed keyed chunk i as
// [TablePartKey](i), with the revision next to it under
// [TablePartRevisionKey](i); DecodeTable still reads them. Tables written
// before segments cut the gzip stream at fixed offsets instead, chunk i in
// <name>-i; the format is the same and readers need no change.
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
	// MaxTableChunkBytes bounds the gzipped bytes of every chunk of an
	// indexed table but the first, so that two fit in one part ConfigMap:
	// a table holds at most (MaxTableParts-1)·MaxTableChunkBytes of gzipped
	// JSON, about 11.6 MiB, however its JSON compresses.
	MaxTableChunkBytes = tableChunkBytes
	// MaxTableSegmentedBytes is the largest table's JSON the encoder lays
	// out whatever its tools: every segment but the last holds at least
	// 512 KiB, unless a tool of more than 512 KiB of JSON ends one early,
	// and an index names at most MaxTableParts-1 segments. Real tools lay
	// out more (segments of 512 KiB to 1 MiB, cut at tools by their names'
	// hashes: about 44 MiB in 63 of them); a table past what its own
	// layout holds fails with a [*TableLayoutError], which says how much
	// of it the segments do hold, so that a publisher can bound the
	// table's JSON at what can be written rather than at this worst case.
	MaxTableSegmentedBytes = (MaxTableParts - 1) * tableSegmentMin
	// MaxTableEntriesBytes bounds the tools' JSON of a table, each with
	// one byte for its separator, as a publisher's budget weighs them: a
	// table within it is within MaxTableBytes, its head and tail included.
	MaxTableEntriesBytes = MaxTableBytes - tableFrameBytes

	// tableFrameBytes is what a table's JSON holds besides its tools':
	// the head `{"schemaVersion":…,"revision":"sha256:…","tools":[` and
	// the tail `]}` (and a comma fewer than the tools).
	tableFrameBytes = len(`{"schemaVersion":"`+SchemaVersion+`","revision":"sha256:`) + 64 + len(`","tools":[`) + len(tableTail)

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
	// ErrTablePartsFull means the chunks of a table fit the part ConfigMaps
	// alone, but not next to the chunks of the stored index and those in
	// their grace period: a publisher waits for the grace, or writes fewer
	// changes at once. [TableEncoder.Encode] wraps it with
	// [ErrTableTooLarge], so that errors.Is(err, ErrTableTooLarge) holds for
	// both; a table too large whatever is stored does not wrap it.
	ErrTablePartsFull = errors.New("toolkit: tool table parts full")
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

// EncodeTable returns the ConfigMap payloads of t, published under baseName,
// as a first publisher lays them out: [TableEncoder.Encode] with nothing
// stored. The first part is the ConfigMap baseName itself; the others, if
// any, are baseName-1, baseName-2, … in order.
func EncodeTable(t *Table, baseName string) ([]TablePart, error) {
	return new(TableEncoder).Encode(t, baseName, TableStored{})
}

// EncodeTableAfter returns the ConfigMap payloads of t, published under
// baseName, placing its chunks where prev, the index stored now (nil if
// none, or if the table is stored plain), keeps them: see
// [TableEncoder.Encode].
func EncodeTableAfter(t *Table, baseName string, prev *TableIndex) ([]TablePart, error) {
	return new(TableEncoder).Encode(t, baseName, TableStored{Index: prev})
}

// TableStored is what [TableEncoder.Encode] needs to know of the table
// stored now to place the chunks of the next revision. The zero value means
// nothing is stored.
type TableStored struct {
	// Index is the index stored now; nil if none, or if the table is stored
	// plain.
	Index *TableIndex
	// Grace, if not nil, returns the bytes, as stored (see
	// [TablePart.StoredSize]), that the part ConfigMap named holds besides
	// the chunks Index names: chunks that no index names and that must
	// stay until their grace period has passed, and anything else a
	// publisher keeps there.
	Grace func(configMap string) int
	// MaxParts, if between 2 and [MaxTableParts], bounds the ConfigMaps
	// the table may take, the base included: a publisher whose readers
	// mount fewer parts than MaxTableParts-1 sets it, and a table that needs
	// more fails with [ErrTableTooLarge]. Zero means MaxTableParts.
	MaxParts int
}

// maxParts returns the ConfigMaps the table may take.
func (s TableStored) maxParts() int {
	if s.MaxParts >= 2 && s.MaxParts < MaxTableParts {
		return s.MaxParts
	}
	return MaxTableParts
}

// TableEncoder encodes successive revisions of a table. It remembers of its
// last encoding the gzip members of its segments and, for every tool, a
// fingerprint and where its JSON lies in them, so that the next encoding
// marshals only the tools that changed and gzips only the segments that
// changed. The zero value is ready to use, and it is safe for concurrent
// use.
type TableEncoder struct {
	mu sync.Mutex
	// lim is the zero value for the production limits; tests set smaller
	// ones.
	lim tableLimits
	// members maps the SHA-256 of a segment's JSON, or of a piece of one
	// cut to fit a chunk, to its gzip member, for the last encoding.
	members map[[sha256.Size]byte][]byte
	// zw compresses segments into zbuf, and zr reads them back; Reset
	// between them, so that their buffers are allocated once, not per
	// segment.
	zw   *gzip.Writer
	zbuf bytes.Buffer
	zr   *gzip.Reader
	// seed is that of the tools' fingerprints.
	seed   maphash.Seed
	seeded bool
	// held is what the last Encode or EncodeTools that succeeded keeps of
	// its table (see heldTable).
	held heldTable
}

// Encode returns the ConfigMap payloads of t, published under baseName.
// The first part is the ConfigMap baseName itself and replaces it whole;
// every further part holds one chunk under its [TableChunkKey], which a
// publisher adds to what that ConfigMap holds (see [TableKey] for the order
// of writes).
//
// t's tools are sorted by name (on a copy) and its SchemaVersion and Revision
// are set from them, so identical tools and an identical stored table always
// give byte-identical parts. A table whose JSON fits in [MaxTablePartBytes]
// is published plain, under [TableKey]; a larger one is gzipped in segments
// (see [TableKey]), in one chunk if they fit next to the index, else in one
// chunk per segment.
//
// Chunk 0 goes into baseName, every other chunk into a part ConfigMap
// baseName-i, 1 ≤ i < [MaxTableParts], which may hold several:
//
//  1. a chunk that stored.Index names stays in its ConfigMap, and is not
//     written again;
//  2. a new chunk goes, if the chunks of the new index there stay within
//     half of [MaxTablePartBytes] (so that any chunk's replacement fits
//     next to them) and it has room now, counting the chunks the stored
//     index names (they stay until the new index is written), those in
//     their grace period (stored.Grace) and the new chunks placed before
//     it: into a part that loses a chunk and keeps others, in the stored
//     index's order; else into the fullest such part, ties to the lowest
//     number; else into the lowest-numbered empty part;
//  3. else, as in a burst of changes, into the part that holds the fewest
//     bytes and has room for it now; and if none has, into the part that
//     holds the fewest bytes the indexes name, where a publisher waits for
//     the grace of what it holds.
//
// So a replacement goes next to the chunks that stay with it, or to an
// empty part if it was alone (one write of the chunk alone, and the old
// part is deleted after the grace).
//
// It fails with [ErrDuplicateTool] if two tools share a name and with
// [ErrTableTooLarge] past [MaxTableBytes] or [MaxTableParts] (or
// stored.MaxParts); and with [ErrTablePartsFull], wrapped in
// ErrTableTooLarge, if the chunks of the stored index and of t together
// overflow the part ConfigMaps although t's alone would fit.
//
// The encoder keeps, of the table it encoded last, the gzip members of its
// segments and for every tool a fingerprint (every field, hashed) and where
// its JSON lies in its segment, not the JSON itself: about the table's
// gzipped size and 48 bytes a tool. The next Encode marshals only the tools
// whose fingerprint changed, takes every other tool's JSON from its
// segment, and gzips only the segments that changed, so that a write after
// one change marshals one tool, not the table. What it reads back costs a
// gunzip of the segments from the first that changed to the last, which
// the revision hashes: segments before the first change are neither read
// nor hashed again.
func (e *TableEncoder) Encode(t *Table, baseName string, stored TableStored) ([]TablePart, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var tools []TableTool
	if t != nil {
		tools = t.Tools
	}
	entries, fresh, err := e.marshalTools(len(tools), func(i int) *TableTool { return &tools[i] })
	if err != nil {
		return nil, err
	}
	return e.encode(entries, fresh, baseName, stored, true)
}

// EncodeTools is [TableEncoder.Encode] of the table of tools, given by
// reference, so that a publisher that holds its tools elsewhere need not
// copy them into a [Table] for every write. The tools are only read.
func (e *TableEncoder) EncodeTools(tools []*TableTool, baseName string, stored TableStored) ([]TablePart, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	entries, fresh, err := e.marshalTools(len(tools), func(i int) *TableTool { return tools[i] })
	if err != nil {
		return nil, err
	}
	return e.encode(entries, fresh, baseName, stored, true)
}

// TableEntryJSON is one tool of a table, already encoded: its name and
// the bytes json.Marshal gives for its [TableTool]. A publisher that keeps
// each tool's JSON from when it was offered hands the entries to
// [TableEncoder.EncodeEntries], so that a write does not marshal the whole
// table again.
type TableEntryJSON struct {
	Name string
	// JSON must be json.Marshal(&tool) for the tool named Name: the
	// encoder copies it into the table and hashes it for the revision as
	// it is. It is not modified.
	JSON []byte
}

// MarshalTableEntry returns the JSON of one tool as a table holds it.
func MarshalTableEntry(t *TableTool) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding tool %q: %w", t.Name, err)
	}
	return b, nil
}

// MarshalTableEntries returns the entries of t's tools, in its order.
func MarshalTableEntries(t *Table) ([]TableEntryJSON, error) {
	if t == nil {
		return nil, nil
	}
	entries := make([]TableEntryJSON, len(t.Tools))
	for i := range t.Tools {
		b, err := MarshalTableEntry(&t.Tools[i])
		if err != nil {
			return nil, fmt.Errorf("encoding tool table: %w", err)
		}
		entries[i] = TableEntryJSON{Name: t.Tools[i].Name, JSON: b}
	}
	return entries, nil
}

// EncodeEntries is [TableEncoder.Encode] of the table of entries: the
// parts are byte-identical to those of Encode of the tools they encode.
// Entries not sorted by name are sorted on a copy. Their JSON is not
// modified, nor kept: segments are assembled and hashed to find their gzip
// member from the last encoding, and only those not found are compressed.
// It leaves what Encode keeps of its tools as it is.
func (e *TableEncoder) EncodeEntries(entries []TableEntryJSON, baseName string, stored TableStored) ([]TablePart, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	byName := func(a, b TableEntryJSON) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(entries, byName) {
		entries = slices.Clone(entries)
		slices.SortFunc(entries, byName)
	}
	held := make([]heldEntry, len(entries))
	fresh := make([][]byte, len(entries))
	for i, en := range entries {
		held[i] = heldEntry{name: en.Name, hash: nameHash(en.Name), seg: -1, off: int32(i), n: jsonLen(en.JSON)}
		fresh[i] = en.JSON
	}
	return e.encode(held, fresh, baseName, stored, false)
}

// layoutChunks returns the parts of an indexed table whose gzip members
// are chunks, the head's first, and whose JSON of size bytes has revision:
// the members in one chunk if they fit next to the index, and the chunks
// placed as [TableEncoder.Encode] says.
func layoutChunks(chunks [][]byte, revision string, size int, baseName string, stored TableStored, lim tableLimits) ([]TablePart, error) {
	maxParts := stored.maxParts()
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	if total <= lim.first {
		// The members concatenate to one gzip stream: one chunk, next to
		// the index.
		chunks = [][]byte{bytes.Join(chunks, nil)}
	}

	idx := TableIndex{SchemaVersion: SchemaVersion, Revision: revision, Encoding: TableEncodingGzip, Size: int64(size)}
	digests := make([]string, len(chunks))
	for i, c := range chunks {
		sum := sha256.Sum256(c)
		digests[i] = hex.EncodeToString(sum[:])
	}
	names, err := placeChunks(baseName, chunks, digests, stored, lim.fill, maxParts)
	if err != nil {
		return nil, err
	}
	parts := []TablePart{{Name: baseName}}
	at := map[string]int{baseName: 0} // ConfigMap name → index in parts
	for i, c := range chunks {
		key := TableChunkKey(digests[i])
		idx.Parts = append(idx.Parts, TableIndexPart{ConfigMap: names[i], Key: key, Size: len(c), SHA256: digests[i]})
		k, ok := at[names[i]]
		if !ok {
			k = len(parts)
			at[names[i]] = k
			parts = append(parts, TablePart{Name: names[i]})
		}
		if parts[k].BinaryData == nil {
			parts[k].BinaryData = map[string][]byte{}
		}
		parts[k].BinaryData[key] = c
	}
	ib, err := json.Marshal(idx)
	if err != nil {
		return nil, fmt.Errorf("encoding tool table index: %w", err)
	}
	parts[0].Data = map[string]string{TableIndexKey: string(ib)}
	if s := parts[0].StoredSize(); s > MaxTablePartBytes {
		// The size of chunk 0 leaves room for the index of MaxTableParts
		// chunks with long names, so this is a bug, not an input error.
		return nil, fmt.Errorf("%w: part %s is %d bytes, at most %d", ErrTableTooLarge, baseName, s, MaxTablePartBytes)
	}
	return parts, nil
}

// placeChunks returns the ConfigMap of each chunk: see
// [TableEncoder.Encode].
func placeChunks(baseName string, chunks [][]byte, digests []string, stored TableStored, fill, maxParts int) ([]string, error) {
	names := make([]string, len(digests))
	names[0] = baseName
	if len(digests) == 1 {
		return names, nil
	}
	storedSize := func(digest string, size int) int {
		return len(TableChunkKey(digest)) + base64.StdEncoding.EncodedLen(size)
	}
	// Where the stored index keeps each content-addressed chunk, the bytes
	// of the chunks it names in each part ConfigMap, and those ConfigMaps
	// in order.
	at := map[string]string{}
	named := map[string]int{}
	var prevCMs []string
	if stored.Index != nil {
		seen := map[string]bool{}
		for _, p := range stored.Index.Parts {
			if !isPartName(baseName, p.ConfigMap) || seen[p.ConfigMap+"/"+p.Key] {
				continue
			}
			if named[p.ConfigMap] == 0 {
				prevCMs = append(prevCMs, p.ConfigMap)
			}
			seen[p.ConfigMap+"/"+p.Key] = true
			named[p.ConfigMap] += storedSize(p.SHA256, p.Size)
			if _, ok := at[p.SHA256]; !ok && p.Key == TableChunkKey(p.SHA256) {
				at[p.SHA256] = p.ConfigMap
			}
		}
	}
	// now is what each part holds while the new chunks are staged: the
	// chunks the stored index names, those in their grace, and the new
	// chunks placed so far. next is what it holds of the new index.
	now := map[string]int{}
	next := map[string]int{}
	grace := map[string]int{}
	for n := 1; n < maxParts; n++ {
		cm := TablePartName(baseName, n)
		if stored.Grace != nil {
			grace[cm] = stored.Grace(cm)
		}
		now[cm] = named[cm] + grace[cm]
	}
	placed := map[string]string{} // digest → ConfigMap, in the new index
	for i := 1; i < len(digests); i++ {
		if cm, ok := at[digests[i]]; ok {
			names[i] = cm
			if _, dup := placed[digests[i]]; !dup {
				next[cm] += storedSize(digests[i], len(chunks[i]))
			}
			placed[digests[i]] = cm
		}
	}
	// The parts that lose a chunk and keep others: a chunk that replaces
	// one goes there first.
	var freed []string
	for _, cm := range prevCMs {
		if next[cm] > 0 && next[cm] < named[cm] {
			freed = append(freed, cm)
		}
	}
	for i := 1; i < len(digests); i++ {
		if names[i] != "" {
			continue
		}
		if cm, ok := placed[digests[i]]; ok {
			// The same chunk twice: one key, in one ConfigMap.
			names[i] = cm
			continue
		}
		size := storedSize(digests[i], len(chunks[i]))
		fits := func(cm string) bool { return now[cm]+size <= MaxTablePartBytes }
		packs := func(cm string) bool { return next[cm] > 0 && next[cm]+size <= fill && fits(cm) }
		best := ""
		// 1. A part that loses a chunk and has room to fill.
		for _, cm := range freed {
			if packs(cm) {
				best = cm
				break
			}
		}
		// 2. The fullest part that the new index fills to at most fill,
		// then the lowest empty one, so parts follow the compressed size.
		for n := 1; best == "" && n < maxParts; n++ {
			if cm := TablePartName(baseName, n); packs(cm) && (best == "" || next[cm] > next[best]) {
				best = cm
			}
		}
		for n := 1; best == "" && n < maxParts; n++ {
			if cm := TablePartName(baseName, n); next[cm] == 0 && now[cm] == 0 {
				best = cm
			}
		}
		// 3. In a burst of changes: the part that holds the fewest bytes
		// and has room, counting the chunks in their grace; failing that,
		// the one that holds the fewest bytes the indexes name, where a
		// publisher waits for a grace.
		if best == "" {
			bestLoad := 0
			for _, withGrace := range []bool{true, false} {
				for n := 1; n < maxParts; n++ {
					cm := TablePartName(baseName, n)
					load := now[cm]
					if !withGrace {
						load -= grace[cm]
					}
					if load+size <= MaxTablePartBytes && (best == "" || load < bestLoad) {
						best, bestLoad = cm, load
					}
				}
				if best != "" {
					break
				}
			}
		}
		if best == "" {
			return nil, fmt.Errorf("%w: %w: the chunks of the stored index and of the new one do not fit in %d ConfigMaps together", ErrTableTooLarge, ErrTablePartsFull, maxParts-1)
		}
		names[i] = best
		now[best] += size
		next[best] += size
		placed[digests[i]] = best
	}
	return names, nil
}

// isPartName reports whether name is TablePartName(baseName, i) for some
// 1 ≤ i < MaxTableParts.
func isPartName(baseName, name string) bool {
	suffix, ok := strings.CutPrefix(name, baseName+"-")
	if !ok {
		return false
	}
	i, err := strconv.Atoi(suffix)
	return err == nil && i >= 1 && i < MaxTableParts && strconv.Itoa(i) == suffix
}

// tableLimits are the sizes the encoding works with; tests use smaller ones
// to reach the split form with small tables.
type tableLimits struct {
	// plain bounds the plain form; first the chunk next to the index when
	// the table fits in one chunk; chunk every further chunk.
	plain, first, chunk int
	// segMin, segSpread and segMax shape the segments of JSON that the
	// chunks compress (see [tableJSON.segments]).
	segMin, segSpread, segMax int
	// fill is how full the chunks of one index may make a part ConfigMap:
	// half of it, so that any chunk's replacement fits next to them.
	fill int
}

var defaultTableLimits = tableLimits{
	plain: MaxTablePartBytes, first: tableFirstChunkBytes, chunk: tableChunkBytes,
	segMin: tableSegmentMin, segSpread: tableSegmentSpread, segMax: tableSegmentMax,
	fill: MaxTablePartBytes / 2,
}

// Segments of the indexed form: raw JSON sizes. A realistic table gzips
// about 6.5:1, so a segment of tableSegmentMax gzips to about 160 KiB,
// within tableChunkBytes; a segment averages about 730 KiB, so a table of
// MaxTableBytes/2 takes about 45 chunks of MaxTableParts.
const (
	tableSegmentMin    = 512 << 10
	tableSegmentSpread = 256 << 10
	tableSegmentMax    = 1 << 20
)

// tableTail ends the table's JSON, after its tools.
const tableTail = "]}"

// nameHash is the first 8 bytes of a tool name's SHA-256.
func nameHash(name string) uint64 {
	sum := sha256.Sum256([]byte(name))
	return binary.BigEndian.Uint64(sum[:8])
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

// TableLayoutError is the [ErrTableTooLarge] of a table whose tools'
// JSON does not lay out in the segments an index names. Its sizes count
// each tool's JSON with one byte for its separator, as a publisher's
// budget weighs the tools.
type TableLayoutError struct {
	// Segments is how many segments the table's JSON takes, MaxSegments
	// how many an index names at most.
	Segments, MaxSegments int
	// Bytes is the tools' JSON of the table.
	Bytes int64
	// Capacity is the tools' JSON of the first MaxSegments segments: what
	// a table laid out as this one holds, a little less than Bytes.
	Capacity int64
}

func (e *TableLayoutError) Error() string {
	return fmt.Sprintf("%v: %d segments of JSON, at most %d", ErrTableTooLarge, e.Segments, e.MaxSegments)
}

// Unwrap makes errors.Is(err, ErrTableTooLarge) hold.
func (e *TableLayoutError) Unwrap() error { return ErrTableTooLarge }

// layoutError is the TableLayoutError of entries cut at segments ends,
// more than maxSegments of them.
func layoutError(entries []heldEntry, ends []int, maxSegments int) *TableLayoutError {
	e := &TableLayoutError{Segments: len(ends), MaxSegments: maxSegments}
	for i, t := range entries {
		if i == ends[maxSegments-1] {
			e.Capacity = e.Bytes
		}
		e.Bytes += int64(t.n) + 1
	}
	return e
}
