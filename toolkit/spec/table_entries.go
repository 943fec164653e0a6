package spec

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// heldTable is what a [TableEncoder] keeps of the last table that Encode or
// EncodeTools encoded: for every tool its fingerprint and where its JSON
// lies, and for every segment its gzip members. The tools' JSON itself is
// not kept: the next encoding gunzips the segments it needs, so that the
// encoder holds about the table's gzipped size, not its JSON.
type heldTable struct {
	// entries are the tools, sorted by name.
	entries []heldEntry
	// segs are the segments in order: in the plain form, one, of all
	// entries, that holds its JSON.
	segs     []heldSegment
	revision string
}

// heldEntry is one tool: its name, the fingerprint of the tool its JSON
// was marshalled from, the hash of its name that cuts segments, and where
// its JSON lies: n bytes at off in the JSON of segment seg. While an
// encoding is under way, seg < 0 means the tool's JSON is new, in
// encodeRun.fresh[off].
type heldEntry struct {
	name string
	fp   uint64
	hash uint64
	seg  int32
	off  int32
	n    int32
}

// heldSegment is the JSON of entries [from, to): each with the comma
// before it but the table's first, and tableTail after the table's last.
type heldSegment struct {
	from, to int
	// size is the length of its JSON.
	size int
	// members are the gzip members whose contents concatenate to its
	// JSON: one, or more where it was cut to fit chunks. Nil in the plain
	// form.
	members []heldMember
	// raw is its JSON in the plain form, else nil.
	raw []byte
	// mid is the state of the revision's SHA-256 at its start (see
	// encodeRun.revision), for every segment but the first.
	mid []byte
}

// heldMember is a gzip member and the SHA-256 of what it holds.
type heldMember struct {
	sum [sha256.Size]byte
	z   []byte
}

// encodeRun is one encoding of a table.
type encodeRun struct {
	e   *TableEncoder
	lim tableLimits
	// entries are the table's tools, sorted by name; those of seg < 0
	// have their JSON in fresh.
	entries []heldEntry
	fresh   [][]byte
	// old is what the encoder held before, whose segments the entries of
	// seg ≥ 0 point into; raws are those gunzipped so far and still
	// needed, free buffers to gunzip or assemble the next into.
	old  *heldTable
	raws map[int32][]byte
	free [][]byte
	// cache and used are the gzip members by digest: those of the last
	// encoding, and those of this one.
	cache, used map[[sha256.Size]byte][]byte
	maxChunks   int
	chunks      [][]byte
	// broken is set when a held segment does not read back.
	broken bool
	// segs are the segments of this encoding; seg is the one being packed.
	segs []heldSegment
	seg  *heldSegment
	// offs are the offsets of the JSON of the entries of the segment being
	// assembled, from its first.
	offs []int32
}

// marshalTools returns the entries of the n tools that tool returns, sorted
// by name, and their JSON where it is new: a tool whose fingerprint is that
// of its name in held keeps its place in held's segments, and only the
// others are marshalled.
func (e *TableEncoder) marshalTools(n int, tool func(i int) *TableTool) ([]heldEntry, [][]byte, error) {
	refs := make([]*TableTool, n)
	for i := range refs {
		refs[i] = tool(i)
	}
	byName := func(a, b *TableTool) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(refs, byName) {
		slices.SortFunc(refs, byName)
	}
	if !e.seeded {
		e.seed, e.seeded = maphash.MakeSeed(), true
	}
	var h maphash.Hash
	h.SetSeed(e.seed)
	entries := make([]heldEntry, n)
	var fresh [][]byte
	old := e.held.entries
	k := 0
	for i, t := range refs {
		h.Reset()
		fp, err := fingerprint(&h, t)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding tool table: encoding tool %q: %w", t.Name, err)
		}
		en := &entries[i]
		en.name, en.fp = t.Name, fp
		for k < len(old) && old[k].name < t.Name {
			k++
		}
		if k < len(old) && old[k].name == t.Name {
			if old[k].fp == fp {
				*en = old[k]
				continue
			}
			en.hash = old[k].hash
		} else {
			en.hash = nameHash(t.Name)
		}
		b, err := MarshalTableEntry(t)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding tool table: %w", err)
		}
		en.seg, en.off, en.n = -1, int32(len(fresh)), jsonLen(b)
		fresh = append(fresh, b)
	}
	return entries, fresh, nil
}

// jsonLen returns len(b), or past MaxTableBytes if that does not fit in an
// int32: the table is refused before the offsets are used.
func jsonLen(b []byte) int32 {
	return int32(min(len(b), MaxTableBytes+1))
}

// encode encodes the table of entries, sorted by name, whose new JSON is
// in fresh. With keep, what it holds replaces e.held once it succeeds.
func (e *TableEncoder) encode(entries []heldEntry, fresh [][]byte, baseName string, stored TableStored, keep bool) ([]TablePart, error) {
	if baseName == "" {
		return nil, fmt.Errorf("%w: empty ConfigMap name", ErrTableMalformed)
	}
	lim := e.lim
	if lim == (tableLimits{}) {
		lim = defaultTableLimits
	}
	n := 0
	for i := range entries {
		if i > 0 && entries[i].name == entries[i-1].name {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateTool, entries[i].name)
		}
		if i > 0 {
			n++
		}
		n += int(entries[i].n)
		if n > MaxTableBytes {
			return nil, fmt.Errorf("%w: more than %d bytes of JSON", ErrTableTooLarge, MaxTableBytes)
		}
	}
	size := tableHeadLen + n + len(tableTail)
	if size > MaxTableBytes {
		return nil, fmt.Errorf("%w: %d bytes of JSON, at most %d", ErrTableTooLarge, size, MaxTableBytes)
	}
	r := &encodeRun{e: e, lim: lim, entries: entries, fresh: fresh, old: &e.held, raws: map[int32][]byte{},
		cache: e.members, used: map[[sha256.Size]byte][]byte{}, maxChunks: stored.maxParts()}
	plain := len(TableKey)+size <= lim.plain
	var ends []int
	if plain {
		ends = []int{len(entries)}
	} else {
		ends = segmentEnds(entries, lim)
		if len(ends) >= r.maxChunks {
			return nil, layoutError(entries, ends, r.maxChunks-1)
		}
		if e.zw == nil {
			e.zw, _ = gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
		}
		r.chunks = make([][]byte, 1, len(ends)+1)
	}
	revision, err := r.segments(ends, plain)
	if r.broken {
		e.held = heldTable{}
	}
	if err != nil {
		if !plain {
			// A table too large keeps what it compressed, next to the last
			// encoding's: a publisher that denies some of its tools next
			// compresses only the segments they leave.
			if e.members == nil {
				e.members = map[[sha256.Size]byte][]byte{}
			}
			maps.Copy(e.members, r.used)
		}
		return nil, err
	}
	head := tableHead(revision)
	var parts []TablePart
	if plain {
		raw := r.segs[0].raw
		j := make([]byte, 0, len(head)+len(raw))
		parts = []TablePart{{Name: baseName, Data: map[string]string{TableKey: string(append(append(j, head...), raw...))}}}
	} else {
		z, err := r.member(sha256.Sum256(head), head)
		if err != nil {
			return nil, err
		}
		r.chunks[0] = z
		e.members = r.used
		if parts, err = layoutChunks(r.chunks, revision, size, baseName, stored, lim); err != nil {
			return nil, err
		}
	}
	if keep {
		e.held = heldTable{entries: entries, segs: r.segs, revision: revision}
	}
	return parts, nil
}

// tableHeadLen is the length of every table's head.
var tableHeadLen = len(tableHead("sha256:" + strings.Repeat("0", sha256.Size*2)))

// tableHead returns `{"schemaVersion":…,"revision":…,"tools":[`.
func tableHead(revision string) []byte {
	head, _ := json.Marshal(struct {
		SchemaVersion string `json:"schemaVersion"`
		Revision      string `json:"revision"`
	}{SchemaVersion, revision})
	return append(head[:len(head)-1], `,"tools":[`...)
}

// segments packs the segments that end at ends into r.chunks (after chunk
// 0, the head's, left for the caller), or in the plain form assembles the
// one segment, and returns the table's revision: the SHA-256 of the JSON
// of the tools array, "[" + tools joined by "," + "]", which is "[" and the
// segments' JSON without the last byte ('}'). A segment of the same tools
// as one held, in the same place, is not compressed again; segments held
// as they are from the first on are not hashed again either, the hash
// going on from the state held at the first that changed.
func (r *encodeRun) segments(ends []int, plain bool) (string, error) {
	old := r.old
	h := sha256.New()
	h.Write([]byte{'['})
	prefix := true // the segments so far are those held, in their places
	r.segs = make([]heldSegment, len(ends))
	from := 0
	for s, to := range ends {
		k := r.same(from, to, plain)
		if prefix && k == s {
			r.reuse(s, k, from, to, r.old.segs[k].mid)
			from = to
			continue
		}
		if prefix {
			prefix = false
			if err := r.resume(h, s); err != nil {
				return "", err
			}
		}
		seg := &r.segs[s]
		*seg = heldSegment{from: from, to: to}
		if s > 0 {
			mid, err := h.(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				return "", fmt.Errorf("encoding tool table: %w", err)
			}
			seg.mid = mid
		}
		r.release(from, k)
		var raw []byte
		if k >= 0 {
			var err error
			if raw, err = r.raw(int32(k)); err != nil {
				return "", err
			}
			r.reuse(s, k, from, to, seg.mid)
		} else {
			var err error
			if raw, err = r.assemble(s, from, to, plain); err != nil {
				return "", err
			}
		}
		if to == len(r.entries) {
			h.Write(raw[:len(raw)-1])
		} else {
			h.Write(raw)
		}
		if k < 0 {
			seg.size = len(raw)
			if plain {
				seg.raw = raw
			} else {
				r.seg = seg
				if err := r.pack(raw, from, to); err != nil {
					return "", err
				}
				r.free = append(r.free, raw)
			}
		}
		from = to
	}
	if prefix {
		return old.revision, nil
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// same returns the held segment that holds the JSON of entries [from, to)
// as a segment of this encoding would, in a form this one can reuse, or -1:
// one of the same tools, unchanged, first of the table or not as they are,
// last or not.
func (r *encodeRun) same(from, to int, plain bool) int {
	if from == to || r.entries[from].seg < 0 {
		return -1
	}
	k := r.entries[from].seg
	o := &r.old.segs[k]
	if o.to-o.from != to-from || (o.from == 0) != (from == 0) || (o.to == len(r.old.entries)) != (to == len(r.entries)) ||
		(plain && o.raw == nil) || (!plain && o.members == nil) {
		return -1
	}
	for _, en := range r.entries[from:to] {
		if en.seg != k {
			return -1
		}
	}
	return int(k)
}

// reuse makes segment s of this encoding, of entries [from, to), held
// segment k, whose tools are its own, with mid the revision's state at its
// start.
func (r *encodeRun) reuse(s, k, from, to int, mid []byte) {
	o := r.old.segs[k]
	if s == 0 {
		mid = nil
	}
	r.segs[s] = heldSegment{from: from, to: to, size: o.size, members: o.members, raw: o.raw, mid: mid}
	// The entries keep their offsets: the JSON is the same.
	for i := from; i < to; i++ {
		r.entries[i].seg = int32(s)
	}
	for _, m := range o.members {
		r.used[m.sum] = m.z
		r.chunks = append(r.chunks, m.z)
	}
}

// resume sets h to the revision's state at the start of segment s of this
// encoding, whose segments before it are the held ones: h holds "[" now.
func (r *encodeRun) resume(h hash.Hash, s int) error {
	if s == 0 {
		return nil
	}
	if s < len(r.old.segs) && r.old.segs[s].mid != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(r.old.segs[s].mid); err != nil {
			return fmt.Errorf("encoding tool table: %w", err)
		}
		return nil
	}
	for k := range s {
		raw, err := r.raw(int32(k))
		if err != nil {
			return err
		}
		h.Write(raw)
	}
	return nil
}

// raw returns the JSON of held segment k, gunzipped once.
func (r *encodeRun) raw(k int32) ([]byte, error) {
	o := &r.old.segs[k]
	if o.raw != nil {
		return o.raw, nil
	}
	if b, ok := r.raws[k]; ok {
		return b, nil
	}
	buf := r.buffer(o.size)[:o.size]
	readers := make([]io.Reader, len(o.members))
	for i, m := range o.members {
		readers[i] = bytes.NewReader(m.z)
	}
	zr := r.e.zr
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(io.MultiReader(readers...))
		r.e.zr = zr
	} else {
		err = zr.Reset(io.MultiReader(readers...))
	}
	if err == nil {
		_, err = io.ReadFull(zr, buf)
	}
	if err == nil {
		var one [1]byte
		if _, err = zr.Read(one[:]); errors.Is(err, io.EOF) {
			err = nil
		} else if err == nil {
			err = errors.New("longer than it was")
		}
	}
	if err != nil {
		// What is held does not read back: the next encoding starts
		// afresh, marshalling every tool.
		r.e.zr, r.broken = nil, true
		return nil, fmt.Errorf("encoding tool table: reading back a segment of the last encoding: %w", err)
	}
	r.raws[k] = buf
	return buf, nil
}

// release returns to r.free the gunzipped held segments that no segment
// from entry from on needs: the held segments are in the entries' order,
// so those before the first that entries from on point into.
func (r *encodeRun) release(from, k int) {
	if len(r.raws) == 0 {
		return
	}
	first := int32(k)
	if k < 0 {
		first = -1
		for _, en := range r.entries[from:] {
			if en.seg >= 0 {
				first = en.seg
				break
			}
		}
		if first < 0 {
			first = math.MaxInt32
		}
	}
	for j, b := range r.raws {
		if j < first {
			delete(r.raws, j)
			r.free = append(r.free, b)
		}
	}
}

// buffer returns an empty buffer of capacity n at least, a free one if one
// is large enough.
func (r *encodeRun) buffer(n int) []byte {
	for i, b := range r.free {
		if cap(b) >= n {
			r.free = slices.Delete(r.free, i, i+1)
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

// assemble returns the JSON of entries [from, to), and sets their offsets
// in it. In the plain form the buffer is the segment's to hold; else it
// may be one reused.
func (r *encodeRun) assemble(s, from, to int, plain bool) ([]byte, error) {
	size := 0
	for _, en := range r.entries[from:to] {
		size += int(en.n) + 1
	}
	if from == 0 && to > from {
		size--
	}
	if to == len(r.entries) {
		size += len(tableTail)
	}
	var out []byte
	if plain {
		out = make([]byte, 0, size)
	} else {
		out = r.buffer(size)
	}
	r.offs = r.offs[:0]
	for i := from; i < to; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		en := &r.entries[i]
		r.offs = append(r.offs, int32(len(out)))
		if en.seg < 0 {
			out = append(out, r.fresh[en.off]...)
		} else {
			raw, err := r.raw(en.seg)
			if err != nil {
				return nil, err
			}
			out = append(out, raw[en.off:en.off+en.n]...)
		}
	}
	if to == len(r.entries) {
		out = append(out, tableTail...)
	}
	// The entries point into this segment from now on: the held ones
	// they pointed into before are all read.
	for i := from; i < to; i++ {
		r.entries[i].seg, r.entries[i].off = int32(s), r.offs[i-from]
	}
	return out, nil
}

// pack appends to r.chunks the chunks of entries [from, to) of the segment
// r.seg, whose JSON is raw: one gzip member, or, if it passes lim.chunk,
// the chunks of two halves cut at the tool of lowest name hash in its
// middle half, so that the cut, too, stays where it is when another tool
// changes. A single tool too large for a chunk is cut in bytes.
func (r *encodeRun) pack(raw []byte, from, to int) error {
	b := raw[r.start(from):r.end(raw, to)]
	key := sha256.Sum256(b)
	z, err := r.member(key, b)
	if err != nil {
		return err
	}
	if len(z) <= r.lim.chunk {
		return r.add(key, z)
	}
	if to-from == 1 {
		return r.packBytes(b)
	}
	cut := r.cut(from, to)
	if err := r.pack(raw, from, cut); err != nil {
		return err
	}
	return r.pack(raw, cut, to)
}

// start returns where entry i's JSON starts in its segment's, with the
// comma before it; end where the JSON of the entries before i ends.
func (r *encodeRun) start(i int) int {
	if i == 0 {
		return 0
	}
	return int(r.entries[i].off) - 1
}

func (r *encodeRun) end(raw []byte, i int) int {
	if i == r.seg.to {
		return len(raw)
	}
	return r.start(i)
}

// cut returns where to split tools [from, to), to-from ≥ 2: after the tool of
// lowest name hash among those that end within the middle half of the
// segment's bytes, or in the middle if none does.
func (r *encodeRun) cut(from, to int) int {
	total := 0
	for _, en := range r.entries[from:to] {
		total += int(en.n) + 1
	}
	best, bestHash := -1, uint64(math.MaxUint64)
	acc := 0
	for i := from; i < to-1; i++ {
		acc += int(r.entries[i].n) + 1
		if acc < total/4 || acc > total-total/4 {
			continue
		}
		if h := r.entries[i].hash; best < 0 || h < bestHash {
			best, bestHash = i+1, h
		}
	}
	if best < 0 {
		return from + (to-from)/2
	}
	return best
}

// packBytes appends the chunks of raw, one tool's JSON too large for one
// chunk: halves, recursively. The members' contents still concatenate to
// the table's JSON.
func (r *encodeRun) packBytes(raw []byte) error {
	key := sha256.Sum256(raw)
	z, err := r.member(key, raw)
	if err != nil {
		return err
	}
	if len(z) <= r.lim.chunk || len(raw) <= 1 {
		return r.add(key, z)
	}
	if err := r.packBytes(raw[:len(raw)/2]); err != nil {
		return err
	}
	return r.packBytes(raw[len(raw)/2:])
}

func (r *encodeRun) add(key [sha256.Size]byte, z []byte) error {
	if len(z) > r.lim.chunk {
		return fmt.Errorf("%w: a chunk of %d bytes, at most %d", ErrTableTooLarge, len(z), r.lim.chunk)
	}
	if len(r.chunks) >= r.maxChunks {
		return fmt.Errorf("%w: more than %d parts of gzipped JSON", ErrTableTooLarge, r.maxChunks)
	}
	r.chunks = append(r.chunks, z)
	r.seg.members = append(r.seg.members, heldMember{sum: key, z: z})
	return nil
}

// member returns raw, whose SHA-256 is key, as one gzip member, from the
// cache if an earlier encoding compressed the same bytes.
func (r *encodeRun) member(key [sha256.Size]byte, raw []byte) ([]byte, error) {
	if z, ok := r.used[key]; ok {
		return z, nil
	}
	if z, ok := r.cache[key]; ok {
		r.used[key] = z
		return z, nil
	}
	// gzip's header is fixed (no name, no time), so equal input gives equal
	// bytes within one Go release; readers rely on digests, not on this.
	zbuf, zw := &r.e.zbuf, r.e.zw
	zbuf.Reset()
	zw.Reset(zbuf)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("compressing tool table: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing tool table: %w", err)
	}
	// A copy the member's size: a member is kept for as long as the table
	// holds it, by the encoder and in the ConfigMaps the publisher holds
	// (during a grace too), and a buffer grown by doubling for each held up
	// to as much again.
	z := bytes.Clone(zbuf.Bytes())
	r.used[key] = z
	return z, nil
}

// segmentEnds cuts the tools into segments by their names, so that a change
// to one tool changes its segment alone, and returns the end (exclusive) of
// each. A segment ends after the first tool, once it holds lim.segMin
// bytes, whose name hashes below a threshold in proportion to its size (so
// lim.segSpread bytes pass on average before one does), or before the tool
// that would take it past lim.segMax. A cut depends on the tools since the
// last cut alone, so segments after a changed one come out as they were
// once a cut falls on a tool where it fell before: almost always the next.
func segmentEnds(entries []heldEntry, lim tableLimits) []int {
	var ends []int
	acc := 0
	per := math.MaxUint64 / uint64(max(lim.segSpread, 1))
	for i := range entries {
		s := int(entries[i].n) + 1
		if acc > 0 && acc+s > lim.segMax {
			ends = append(ends, i)
			acc = 0
		}
		acc += s
		if acc >= lim.segMin && (s >= lim.segSpread || entries[i].hash < uint64(s)*per) {
			ends = append(ends, i+1)
			acc = 0
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(entries) {
		ends = append(ends, len(entries))
	}
	return ends
}

// fingerprint hashes every field of t that its JSON holds, each with its
// length or presence, so that two tools with one fingerprint marshal alike
// but for a 64-bit hash collision under a seed of this process. _meta is
// hashed as a JSON value (jsonValueHash), not marshalled: that took six
// allocations a tool, half of a first encoding's.
func fingerprint(h *maphash.Hash, t *TableTool) (uint64, error) {
	str := func(s string) {
		var n [binary.MaxVarintLen64]byte
		_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		_, _ = h.WriteString(s)
	}
	raw := func(b []byte) {
		var n [binary.MaxVarintLen64]byte
		// nil and empty marshal differently ("null" and an error): tell them
		// apart.
		if b == nil {
			_ = h.WriteByte(0)
			return
		}
		_ = h.WriteByte(1)
		_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		_, _ = h.Write(b)
	}
	flag := func(b *bool) {
		switch {
		case b == nil:
			_ = h.WriteByte(0)
		case *b:
			_ = h.WriteByte(1)
		default:
			_ = h.WriteByte(2)
		}
	}
	str(t.Name)
	str(t.SourceName)
	str(t.Title)
	str(t.Description)
	raw(t.InputSchema)
	raw(t.OutputSchema)
	if a := t.Annotations; a == nil {
		_ = h.WriteByte(0)
	} else {
		_ = h.WriteByte(1)
		str(a.Title)
		flag(a.ReadOnlyHint)
		flag(a.DestructiveHint)
		flag(a.IdempotentHint)
		flag(a.OpenWorldHint)
	}
	if t.Meta == nil {
		_ = h.WriteByte(0)
	} else {
		x, err := jsonValueHash(h.Seed(), t.Meta)
		if err != nil {
			return 0, err
		}
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], x)
		_ = h.WriteByte(1)
		_, _ = h.Write(n[:])
	}
	if x := t.Execution; x == nil {
		_ = h.WriteByte(0)
	} else {
		_ = h.WriteByte(1)
		str(x.TaskSupport)
	}
	str(t.SchemaDigest)
	str(t.ToolSet.Namespace)
	str(t.ToolSet.Name)
	str(t.Protocol)
	if e := t.Endpoints; e == nil {
		_ = h.WriteByte(0)
	} else {
		_ = h.WriteByte(1)
		str(e.Invoke)
		str(e.MCP)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(t.Extensions)))
	_, _ = h.Write(n[:])
	for _, e := range t.Extensions {
		str(e)
	}
	binary.LittleEndian.PutUint64(n[:], uint64(t.CallsPerMinute))
	_, _ = h.Write(n[:])
	return h.Sum64(), nil
}

// jsonValueHash returns the hash under seed of v, a value as
// encoding/json decodes one into an any (nil, bool, float64, string, []any,
// map[string]any) or any other, so that two values of one hash marshal
// alike: each kind is tagged, and a map's entries are hashed each and
// summed, in no order, as JSON sorts them. A value of another type is
// hashed as its JSON. Each call hashes in a maphash.Hash of its own, on
// its stack: one passed down the recursion went to the heap, two
// allocations a tool.
func jsonValueHash(seed maphash.Seed, v any) (uint64, error) {
	var h maphash.Hash
	h.SetSeed(seed)
	var n [binary.MaxVarintLen64]byte
	word := func(x uint64) {
		binary.LittleEndian.PutUint64(n[:8], x)
		_, _ = h.Write(n[:8])
	}
	str := func(s string) {
		word(uint64(len(s)))
		_, _ = h.WriteString(s)
	}
	switch v := v.(type) {
	case nil:
		_ = h.WriteByte(0)
	case bool:
		if v {
			_ = h.WriteByte(1)
		} else {
			_ = h.WriteByte(2)
		}
	case float64:
		_ = h.WriteByte(3)
		word(math.Float64bits(v))
	case string:
		_ = h.WriteByte(4)
		str(v)
	case []any:
		_ = h.WriteByte(5)
		word(uint64(len(v)))
		for _, e := range v {
			x, err := jsonValueHash(seed, e)
			if err != nil {
				return 0, err
			}
			word(x)
		}
	case map[string]any:
		_ = h.WriteByte(6)
		word(uint64(len(v)))
		var sum uint64
		for k, e := range v {
			x, err := jsonValueHash(seed, e)
			if err != nil {
				return 0, err
			}
			sum += maphash.String(seed, k) ^ (x * 0x9e3779b97f4a7c15)
		}
		word(sum)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return 0, err
		}
		_ = h.WriteByte(7)
		str(string(b))
	}
	return h.Sum64(), nil
}
