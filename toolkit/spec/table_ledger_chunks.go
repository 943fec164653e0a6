package spec

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The ledger in chunks: how a publisher stores its ledger (see
// [TableLedgerKey]) apart from the table, so that a write that changes a
// tool but no owner writes no byte of it, and one that changes an owner
// writes one chunk.
//
// The records are cut into n chunks, n a power of two up to
// [MaxTableLedgerChunks], by their owner: the first bits of the SHA-256 of
// the owner ToolSet's "namespace/name" ([TableLedgerChunkOf]). Chunk i of n
// is ConfigMap [TableLedgerName](base, i, n), holding under
// [TableLedgerChunkKey] the gzipped JSON of a [TableLedgerChunk]: the
// records of the names its owners hold. A chunk with no record is not
// stored. n follows the names ([TableLedgerChunks]), about 1,024 a chunk,
// and changes only when they double or fall to an eighth. So a ToolSet
// that claims names, or goes, changes one chunk, and a name handed from
// one ToolSet to another the chunks of the two; the names of one owner
// that share a record stay one group, as compact as in one ledger.
//
// A chunk is not written with the table, so every record names the owner
// it was written for, its toolSet: a record whose toolSet is not the
// entry's describes another owner (the chunk was written before a table
// write that did not follow, or after one that did not reach it), and is
// ignored. A publisher writes the chunks before the table they describe.
//
// The records are also where the table keeps each owner's UID
// (toolSetUID), once per owner rather than once per entry: a reader of the
// table that needs it (a publisher restoring, a gateway keeping a task to
// the object it was started on) reads the ledger too. A chunk written
// ahead of a table write that did not follow, for an owner deleted and
// created again under its name, gives the old entries the new object's
// UID: the owner the publisher had decided on, whose write was still to
// come.
//
// The ConfigMaps are named <base>.ledger-<i>-of-<n>: not <base>-<i>, so a
// reader of the table, which reads <base> and <base>-<i>, neither mounts
// nor watches them.

// TableLedgerChunkKey is the key, in binaryData, of a ledger chunk's
// gzipped JSON in its ConfigMap.
const TableLedgerChunkKey = "ledger.json.gz"

// MaxTableLedgerChunks bounds the chunks of a ledger.
const MaxTableLedgerChunks = 64

// tableLedgerNamesPerChunk is how many names a chunk holds, about, before
// the ledger is cut into twice as many.
const tableLedgerNamesPerChunk = 1024

// TableLedgerName returns the name of the ConfigMap of chunk i of n of the
// ledger of the table published as baseName.
func TableLedgerName(baseName string, i, n int) string {
	return baseName + ".ledger-" + strconv.Itoa(i) + "-of-" + strconv.Itoa(n)
}

// ParseTableLedgerName returns the chunk that ConfigMap name is of the
// ledger of the table published as baseName: i of n, n a power of two up
// to [MaxTableLedgerChunks], i < n.
func ParseTableLedgerName(baseName, name string) (i, n int, ok bool) {
	rest, ok := strings.CutPrefix(name, baseName+".ledger-")
	if !ok {
		return 0, 0, false
	}
	is, ns, ok := strings.Cut(rest, "-of-")
	if !ok {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil || strconv.Itoa(i) != is || strconv.Itoa(n) != ns ||
		n < 1 || n > MaxTableLedgerChunks || n&(n-1) != 0 || i < 0 || i >= n {
		return 0, 0, false
	}
	return i, n, true
}

// TableLedgerChunkOf returns the chunk of n (a power of two) that holds
// the records of the names that owner holds: the first log2(n) bits of
// the SHA-256 of its "namespace/name".
func TableLedgerChunkOf(owner ObjectReference, n int) int {
	if n <= 1 {
		return 0
	}
	return int(nameHash(owner.String()) >> (64 - bits.TrailingZeros(uint(n))))
}

// TableLedgerChunks returns how many chunks a ledger of names records is
// cut into, stored the number it is cut into now (0 for none): stored, if
// it is a power of two between the fewest that hold about 1,024 names each
// and eight times that, else the fewest.
func TableLedgerChunks(names, stored int) int {
	want := 1
	for want < MaxTableLedgerChunks && names > want*tableLedgerNamesPerChunk {
		want *= 2
	}
	if stored >= want && stored <= 8*want && stored <= MaxTableLedgerChunks && stored&(stored-1) == 0 {
		return stored
	}
	return want
}

// TableLedgerChunk is the JSON under [TableLedgerChunkKey], once
// decompressed.
type TableLedgerChunk struct {
	// SchemaVersion is always [SchemaVersion].
	SchemaVersion string `json:"schemaVersion"`
	// Records group the chunk's names by their record and owner, the
	// earliest first.
	Records []TableLedgerOwned `json:"records"`
}

// TableLedgerOwned is the names of one owner that share one record.
type TableLedgerOwned struct {
	Since time.Time `json:"since"`
	Why   string    `json:"why"`
	// ToolSet is the owner the entries of the names have when the record
	// is written, and ToolSetUID its UID, which the entries do not carry.
	ToolSet    ObjectReference `json:"toolSet"`
	ToolSetUID string          `json:"toolSetUID,omitempty"`
	Names      []string        `json:"names"`
}

// TableLedgerEncoder encodes the chunks of successive ledgers. It
// remembers the compressed chunks of its last encoding, so that the next
// one compresses only the chunks that changed. The zero value is ready to
// use, and it is safe for concurrent use.
type TableLedgerEncoder struct {
	mu sync.Mutex
	// last maps the digest of a chunk's records (see recordsSum) to its
	// part, for the chunks of the last encoding: a chunk whose records did
	// not change is neither marshalled nor compressed again.
	last map[[sha256.Size]byte]TablePart
}

// Encode returns the ConfigMap payloads of the ledger of the table of
// tools published as baseName, from records, one per tool in the same order
// (a table's Records), cut into n chunks (see [TableLedgerChunks]): one
// part per chunk that holds a record, in order, each holding
// [TableLedgerChunkKey] alone. Equal tools and records give byte-identical
// parts. Each part stays within [MaxTablePartBytes]; a chunk that would
// not keeps, of each namespace, the earliest records within a fair share
// (see ledgerCut), and the names left out have no record. It returns none
// for no record.
func (e *TableLedgerEncoder) Encode(tools []*TableTool, records []TableRecord, baseName string, n int) ([]TablePart, error) {
	if len(records) != len(tools) {
		return nil, fmt.Errorf("%w: %d records for %d tools", ErrTableMalformed, len(records), len(tools))
	}
	if n < 1 || n > MaxTableLedgerChunks || n&(n-1) != 0 {
		return nil, fmt.Errorf("%w: a ledger of %d chunks", ErrTableMalformed, n)
	}
	// The digest of each chunk's records, in the tools' order, name by
	// name: what decides whether it changed. Each record's chunk is found
	// once (an owner's hash once for its names in a row) and kept, so that
	// a chunk to encode lists its records without hashing every owner
	// again: finding them chunk by chunk cost 3.2 million hashes a write of
	// 50,000 names in 64 chunks.
	sums := make([]hash.Hash, n)
	chunks := make([]uint8, len(records)) // n is at most MaxTableLedgerChunks
	var (
		buf   []byte
		owner ObjectReference
		c     = -1
	)
	for i, r := range records {
		if r.Why == "" {
			continue
		}
		t := tools[i]
		if c < 0 || t.ToolSet != owner {
			owner, c = t.ToolSet, TableLedgerChunkOf(t.ToolSet, n)
		}
		chunks[i] = uint8(c)
		if sums[c] == nil {
			sums[c] = sha256.New()
		}
		buf = appendRecord(buf[:0], t, r)
		sums[c].Write(buf)
	}
	// members returns the records of chunk c.
	members := func(c int) []int {
		var out []int
		for i, r := range records {
			if r.Why != "" && int(chunks[i]) == c {
				out = append(out, i)
			}
		}
		return out
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	next := map[[sha256.Size]byte]TablePart{}
	var parts []TablePart
	var zw ledgerGzip
	for c := range n {
		if sums[c] == nil {
			continue
		}
		var sum [sha256.Size]byte
		sums[c].Sum(sum[:0])
		// The name is in the digest: the same records as chunk c of
		// another n are another part.
		name := TableLedgerName(baseName, c, n)
		sum = sha256.Sum256(append(sum[:], name...))
		part, ok := e.last[sum]
		if !ok {
			part, ok = encodeLedgerChunk(&zw, tools, records, members(c), name)
		}
		if ok {
			next[sum] = part
			parts = append(parts, part)
		}
	}
	e.last = next
	return parts, nil
}

// appendRecord appends what identifies the record r of tool t: its name,
// owner, UID, since (to the second) and why, each ended by a zero byte.
func appendRecord(buf []byte, t *TableTool, r TableRecord) []byte {
	for _, s := range []string{t.Name, t.ToolSet.Namespace, t.ToolSet.Name, t.ToolSetUID, r.Why} {
		buf = append(buf, s...)
		buf = append(buf, 0)
	}
	return strconv.AppendInt(buf, r.Since.Unix(), 10)
}

// encodeLedgerChunk returns the part named name of the records members
// (indexes into tools and records, each with a Why): false if none fits.
func encodeLedgerChunk(zw *ledgerGzip, tools []*TableTool, records []TableRecord, members []int, name string) (TablePart, bool) {
	type key struct {
		since int64
		why   string
		owner ObjectReference
		uid   string
	}
	groups := map[key]*TableLedgerOwned{}
	for _, i := range members {
		r, t := records[i], tools[i]
		k := key{r.Since.Unix(), r.Why, t.ToolSet, t.ToolSetUID}
		g := groups[k]
		if g == nil {
			g = &TableLedgerOwned{Since: time.Unix(k.since, 0).UTC(), Why: r.Why, ToolSet: t.ToolSet, ToolSetUID: t.ToolSetUID}
			groups[k] = g
		}
		g.Names = append(g.Names, t.Name)
	}
	sorted := make([]TableLedgerOwned, 0, len(groups))
	for _, g := range groups {
		slices.Sort(g.Names)
		sorted = append(sorted, *g)
	}
	slices.SortFunc(sorted, compareOwned)
	// Names kept: the earliest records of each namespace, each namespace
	// within one share of the room, cut until the compressed chunk fits.
	room := MaxTablePartBytes - len(TableLedgerChunkKey)
	cut := newLedgerCut(sorted)
	for budget := cut.total; budget > 0; {
		z := zw.chunk(sorted, cut.keep(budget))
		size := base64.StdEncoding.EncodedLen(len(z))
		if size <= room {
			return TablePart{Name: name, BinaryData: map[string][]byte{TableLedgerChunkKey: z}}, true
		}
		budget = min(int(float64(budget)*float64(room)/float64(size)*0.95), budget-1)
	}
	return TablePart{}, false
}

// ledgerCut decides which names of a chunk too large to store keep their
// records. Not simply the earliest: a tenant whose ToolSets claimed many
// long names first would then push every later tenant's records out of
// the chunks its owners share, and with them the UIDs only the ledger
// keeps. So, as the table's own budget denies the heaviest namespace's
// newest tools first, each namespace keeps its earliest names within a
// share of the bytes (the same for all, and more for none than it has):
// a namespace of few names keeps them all while any other is cut.
type ledgerCut struct {
	groups []TableLedgerOwned
	// total is the names' bytes, and perNS each namespace's, the weight
	// of a name being its JSON's.
	total int
	perNS map[string]int
}

func newLedgerCut(groups []TableLedgerOwned) *ledgerCut {
	c := &ledgerCut{groups: groups, perNS: map[string]int{}}
	for _, g := range groups {
		for _, n := range g.Names {
			w := nameWeight(n)
			c.total += w
			c.perNS[g.ToolSet.Namespace] += w
		}
	}
	return c
}

// nameWeight is what a name adds to a chunk's JSON, about.
func nameWeight(name string) int { return len(name) + 3 }

// keep returns, for each group in order, how many of its names (the
// first) keep their records when the names may take budget bytes: each
// namespace its earliest names within the share.
func (c *ledgerCut) keep(budget int) []int {
	share := c.share(budget)
	used := make(map[string]int, len(c.perNS))
	out := make([]int, len(c.groups))
	for i, g := range c.groups {
		ns := g.ToolSet.Namespace
		for _, n := range g.Names {
			if used[ns]+nameWeight(n) > share {
				break
			}
			used[ns] += nameWeight(n)
			out[i]++
		}
	}
	return out
}

// share returns the most bytes of names a namespace keeps when all may
// take budget: the water level at which the namespaces, each counted up
// to it, take budget.
func (c *ledgerCut) share(budget int) int {
	if c.total <= budget {
		return c.total
	}
	sizes := slices.Sorted(maps.Values(c.perNS))
	left := budget
	for i, size := range sizes {
		if rest := len(sizes) - i; size*rest > left {
			return left / rest
		}
		left -= size
	}
	return c.total
}

// compareOwned orders groups: the earliest first, then by why, owner and
// UID, so that the order is the same whatever the map's.
func compareOwned(a, b TableLedgerOwned) int {
	return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Why, b.Why),
		strings.Compare(a.ToolSet.Namespace, b.ToolSet.Namespace), strings.Compare(a.ToolSet.Name, b.ToolSet.Name),
		strings.Compare(a.ToolSetUID, b.ToolSetUID))
}

// ledgerGzip compresses the chunks of one write with one gzip.Writer: at
// BestCompression a new one allocates about 1.6 MB, 100 MB a write of 64
// chunks.
type ledgerGzip struct {
	zw  *gzip.Writer
	buf bytes.Buffer
}

// chunk returns the gzipped JSON of the chunk of groups, each with
// the first keep[i] of its names.
func (z *ledgerGzip) chunk(groups []TableLedgerOwned, keep []int) []byte {
	l := TableLedgerChunk{SchemaVersion: SchemaVersion}
	for i, g := range groups {
		if keep[i] == 0 {
			continue
		}
		g.Names = g.Names[:keep[i]]
		l.Records = append(l.Records, g)
	}
	raw, _ := json.Marshal(&l)
	z.buf.Reset()
	if z.zw == nil {
		z.zw, _ = gzip.NewWriterLevel(&z.buf, gzip.BestCompression)
	} else {
		z.zw.Reset(&z.buf)
	}
	_, _ = z.zw.Write(raw)
	_ = z.zw.Close()
	// A copy the chunk's size, as the table's members (see
	// encodeRun.member).
	return bytes.Clone(z.buf.Bytes())
}

// DecodeTableLedgerChunks reads the ledger of tools, the table published
// as baseName, from its chunks: the parts named as chunks of its ledger
// (others are ignored). It returns one record per tool, in order (a
// table's Records; the zero TableRecord for a tool with none), or nil if
// no part holds a record of any, and sets the ToolSetUID of each tool
// that has a record and none yet (as every tool decoded from a table) to
// the record's.
//
// A record counts for a tool if the record's toolSet is the tool's, and
// its toolSetUID too where the tool has one, and the chunk is the one
// that owner falls in. Were two chunks to hold one (n changed, and the
// writer stopped before it removed the old chunks), the later record is
// kept, whatever the order of parts. A chunk that does not read back is skipped, and the error says
// so, wrapping [ErrTableMalformed] or [ErrTableTooLarge]; the records of
// the others are returned with it. Decompressing is bounded by
// [MaxTableLedgerBytes] of JSON for all the chunks together, and at most
// [MaxTableLedgerChunks] times two chunks are read.
func DecodeTableLedgerChunks(tools []TableTool, baseName string, parts ...TablePart) ([]TableRecord, error) {
	at := make(map[string]int, len(tools))
	for i := range tools {
		at[tools[i].Name] = i
	}
	var (
		out []TableRecord
		// uids are the UIDs of the records of out, set on the tools that
		// have none once every chunk is read.
		uids []string
	)
	err := eachLedgerRecord(baseName, parts, func(g *TableLedgerOwned) {
		rec := TableRecord{Since: g.Since, Why: g.Why}
		for _, name := range g.Names {
			i, ok := at[name]
			if !ok || tools[i].ToolSet != g.ToolSet || (tools[i].ToolSetUID != "" && tools[i].ToolSetUID != g.ToolSetUID) {
				continue
			}
			if out == nil {
				out, uids = make([]TableRecord, len(tools)), make([]string, len(tools))
			}
			if cur := out[i]; cur.Why == "" || cmp.Or(cur.Since.Compare(rec.Since), strings.Compare(cur.Why, rec.Why), strings.Compare(uids[i], g.ToolSetUID)) < 0 {
				out[i], uids[i] = rec, g.ToolSetUID
			}
		}
	})
	for i := range uids {
		if tools[i].ToolSetUID == "" {
			tools[i].ToolSetUID = uids[i]
		}
	}
	return out, err
}

// DecodeTableLedgerOwners reads, from the chunks of the ledger of the
// table published as baseName, each owner's UID: that of its latest
// record (of two at one second, the greater UID), whatever names the
// table has now. It is what a reader that needs the UIDs alone (a
// gateway) keeps between writes of the table: the chunks are written
// before the table, so they know an owner before the table has it, and a
// write of the table that changes no owner writes no chunk. It is bounded
// and reports errors as [DecodeTableLedgerChunks]; a record of no name
// counts too.
func DecodeTableLedgerOwners(baseName string, parts ...TablePart) (map[ObjectReference]string, error) {
	uids := map[ObjectReference]string{}
	since := map[ObjectReference]time.Time{}
	err := eachLedgerRecord(baseName, parts, func(g *TableLedgerOwned) {
		if g.ToolSetUID == "" {
			return
		}
		if at, ok := since[g.ToolSet]; !ok || g.Since.After(at) || (g.Since.Equal(at) && g.ToolSetUID > uids[g.ToolSet]) {
			uids[g.ToolSet], since[g.ToolSet] = g.ToolSetUID, g.Since
		}
	})
	return uids, err
}

// eachLedgerRecord calls record with every record of the chunks of the
// ledger of the table published as baseName that counts: one of a
// chunk that reads back, in the chunk its owner falls in. Chunks are read
// in order of name, so that which the bounds leave out does not depend on
// the order of parts.
func eachLedgerRecord(baseName string, parts []TablePart, record func(*TableLedgerOwned)) error {
	var (
		errs   []error
		budget = int64(MaxTableLedgerBytes)
		read   int
	)
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b TablePart) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range parts {
		c, n, ok := ParseTableLedgerName(baseName, p.Name)
		if !ok {
			continue
		}
		if read++; read > 2*MaxTableLedgerChunks {
			errs = append(errs, fmt.Errorf("%w: more than %d ledger chunks", ErrTableTooLarge, 2*MaxTableLedgerChunks))
			break
		}
		chunk, used, err := readLedgerChunk(p.BinaryData[TableLedgerChunkKey], budget)
		budget -= used
		if err != nil {
			errs = append(errs, fmt.Errorf("ledger chunk %s: %w", p.Name, err))
			if budget <= 0 {
				break
			}
			continue
		}
		for i := range chunk.Records {
			if g := &chunk.Records[i]; g.Why != "" && TableLedgerChunkOf(g.ToolSet, n) == c {
				record(g)
			}
		}
	}
	return errors.Join(errs...)
}

// readLedgerChunk decodes one chunk's value, decompressing at most budget
// bytes of JSON; it returns the bytes it decompressed.
func readLedgerChunk(value []byte, budget int64) (*TableLedgerChunk, int64, error) {
	if len(value) == 0 {
		return nil, 0, fmt.Errorf("%w: no %s", ErrTableMalformed, TableLedgerChunkKey)
	}
	zr, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrTableMalformed, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, budget+1))
	if err != nil {
		return nil, int64(len(raw)), fmt.Errorf("%w: %w", ErrTableMalformed, err)
	}
	if int64(len(raw)) > budget {
		return nil, int64(len(raw)), fmt.Errorf("%w: the ledger's chunks pass %d bytes of JSON", ErrTableTooLarge, MaxTableLedgerBytes)
	}
	var l TableLedgerChunk
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, int64(len(raw)), fmt.Errorf("%w: %w", ErrTableMalformed, err)
	}
	if l.SchemaVersion != SchemaVersion {
		return nil, int64(len(raw)), fmt.Errorf("%w: schemaVersion %q, want %q", ErrTableMalformed, l.SchemaVersion, SchemaVersion)
	}
	return &l, int64(len(raw)), nil
}
