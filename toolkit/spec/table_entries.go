package spec

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
)

// entryCache holds the JSON of every tool of a [TableEncoder]'s last
// encoding, by name, with the fingerprint of the tool it was marshalled
// from: the next encoding marshals only the tools whose fingerprint
// changed, so that a write after one change encodes one entry, not the
// whole table.
type entryCache struct {
	seed    maphash.Seed
	entries map[string]*cachedEntry
	// gen counts the encodings; an entry not seen in the last one is
	// dropped.
	gen uint64
	// bufs hold the entries of the last two calls, in turn: the entries
	// of the last call, and the JSON they name, stay as they are until the
	// call after next, so that an encoder may compare the next call's
	// buffers with them (see TableEncoder.sums).
	bufs [2][]TableEntryJSON
}

type cachedEntry struct {
	fingerprint uint64
	json        []byte
	gen         uint64
}

// marshal returns the entries of the n tools that tool returns, in their
// order, marshalling only the tools that changed since the last call. The
// slice is reused by the call after next.
func (c *entryCache) marshal(n int, tool func(i int) *TableTool) ([]TableEntryJSON, error) {
	if c.entries == nil {
		c.seed = maphash.MakeSeed()
		c.entries = make(map[string]*cachedEntry, n)
	}
	c.gen++
	out := c.bufs[c.gen%2][:0]
	var h maphash.Hash
	h.SetSeed(c.seed)
	for i := range n {
		t := tool(i)
		h.Reset()
		fp, err := fingerprint(&h, t)
		if err != nil {
			return nil, fmt.Errorf("encoding tool table: encoding tool %q: %w", t.Name, err)
		}
		e := c.entries[t.Name]
		if e == nil || e.fingerprint != fp {
			b, err := MarshalTableEntry(t)
			if err != nil {
				return nil, fmt.Errorf("encoding tool table: %w", err)
			}
			if e == nil {
				e = &cachedEntry{}
				c.entries[t.Name] = e
			}
			e.fingerprint, e.json = fp, b
		}
		e.gen = c.gen
		out = append(out, TableEntryJSON{Name: t.Name, JSON: e.json})
	}
	if len(c.entries) > len(out) {
		for name, e := range c.entries {
			if e.gen != c.gen {
				delete(c.entries, name)
			}
		}
	}
	c.bufs[c.gen%2] = out
	return out, nil
}

// fingerprint hashes every field of t that its JSON holds, each with its
// length or presence, so that two tools with one fingerprint marshal alike
// but for a 64-bit hash collision under a seed of this process. _meta is
// hashed as its JSON: a map has no order to hash otherwise.
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
		b, err := json.Marshal(t.Meta)
		if err != nil {
			return 0, err
		}
		raw(b)
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
	str(t.ToolSetUID)
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
