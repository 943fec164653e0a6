package spec

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The ledger of a table: since when, and why, each entry's ToolSet owns
// its name. The owner is the entry's ToolSet; the ledger adds the rest,
// so that a publisher that reads the table back keeps them. (This form
// has no UID; the chunked form below records it.) It is stored beside the table, gzipped, under the binaryData
// key [TableLedgerKey] of ConfigMap <name> (the one that holds the table
// in the plain form, or the index in the indexed form), and so written in
// the same write as the table it describes, atomically for readers. It is
// additive: a reader that does not know the key ignores it ([DecodeTable]
// does), and a table without it reads back as before, with no record.
//
// The JSON is a [TableLedger]: the table's revision, and the records
// grouped by (since, to the second, and why), the earliest first, each
// group's names sorted. A ledger whose revision is not the table's (a
// ConfigMap edited by hand, say) describes another table and is ignored.
// It takes only the room its ConfigMap has left within
// [MaxTablePartBytes]: a ledger that would not fit keeps the earliest
// records that do, and the names left out have no record (a publisher
// reads them back as restored, since it started).
//
// This is the form a publisher wrote before the ledger was cut into
// chunks of its own ([TableLedgerChunkKey]): rewritten with every write of
// the table, it made each write of a large table cost the whole ledger. A
// publisher reads it back from a table that has no chunk, and drops it
// with its next write.
const TableLedgerKey = "tools.ledger.json.gz"

// MaxTableLedgerBytes bounds the JSON of a ledger, decompressed, so that a
// hostile or corrupt one cannot exhaust a reader's memory.
const MaxTableLedgerBytes = 16 << 20

// TableRecord is the ledger's record of one entry of a table.
type TableRecord struct {
	// Since is when the entry's ToolSet took the name, to the second.
	Since time.Time
	// Why says how: "Claimed", "HandedOver" or "Restored", as the
	// publisher's ownership rule names it.
	Why string
}

// TableLedger is the JSON under [TableLedgerKey], once decompressed.
type TableLedger struct {
	// Revision is the revision of the table the ledger describes.
	Revision string `json:"revision"`
	// Records group the names by their record.
	Records []TableLedgerGroup `json:"records"`
}

// TableLedgerGroup is the names that share one record.
type TableLedgerGroup struct {
	Since time.Time `json:"since"`
	Why   string    `json:"why"`
	Names []string  `json:"names"`
}

// EncodeTableLedger returns the value of [TableLedgerKey] for a table of
// tools whose revision is revision, from records, one per tool in the same
// order (a table's Records): at most maxStored bytes once in base64, as
// the API server counts binaryData. It keeps the earliest records that
// fit; nil for no record, or if none fits.
func EncodeTableLedger(tools []*TableTool, records []TableRecord, revision string, maxStored int) []byte {
	if len(records) != len(tools) || maxStored <= 0 {
		return nil
	}
	type key struct {
		since int64
		why   string
	}
	groups := map[key]*TableLedgerGroup{}
	total := 0
	for i, r := range records {
		if r.Why == "" {
			continue
		}
		total++
		name := tools[i].Name
		k := key{r.Since.Unix(), r.Why}
		g := groups[k]
		if g == nil {
			g = &TableLedgerGroup{Since: time.Unix(k.since, 0).UTC(), Why: r.Why}
			groups[k] = g
		}
		g.Names = append(g.Names, name)
	}
	l := TableLedger{Revision: revision, Records: make([]TableLedgerGroup, 0, len(groups))}
	for _, g := range groups {
		slices.Sort(g.Names)
		l.Records = append(l.Records, *g)
	}
	slices.SortFunc(l.Records, func(a, b TableLedgerGroup) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Why, b.Why))
	})
	// Names kept, the earliest records first: cut by a share of the names
	// until the compressed ledger fits.
	for keep := total; keep > 0; {
		gz := gzipLedger(l.Revision, l.Records, keep)
		size := base64.StdEncoding.EncodedLen(len(gz))
		if size <= maxStored {
			return gz
		}
		next := int(float64(keep) * float64(maxStored) / float64(size) * 0.95)
		keep = min(next, keep-1)
	}
	return nil
}

// gzipLedger returns the gzipped JSON of the ledger of the first keep
// names of groups.
func gzipLedger(revision string, groups []TableLedgerGroup, keep int) []byte {
	l := TableLedger{Revision: revision}
	for _, g := range groups {
		if keep <= 0 {
			break
		}
		if len(g.Names) > keep {
			g.Names = g.Names[:keep]
		}
		keep -= len(g.Names)
		l.Records = append(l.Records, g)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_ = json.NewEncoder(zw).Encode(&l)
	_ = zw.Close()
	return buf.Bytes()
}

// DecodeTableLedger reads the value of [TableLedgerKey] beside the table
// whose revision is revision: each name's record. A ledger of another
// revision describes another table: it returns none, and no error.
func DecodeTableLedger(value []byte, revision string) (map[string]TableRecord, error) {
	if len(value) == 0 {
		return nil, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		return nil, fmt.Errorf("%w: ledger: %w", ErrTableMalformed, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxTableLedgerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: ledger: %w", ErrTableMalformed, err)
	}
	if len(raw) > MaxTableLedgerBytes {
		return nil, fmt.Errorf("%w: ledger of more than %d bytes of JSON", ErrTableTooLarge, MaxTableLedgerBytes)
	}
	var l TableLedger
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%w: ledger: %w", ErrTableMalformed, err)
	}
	if l.Revision != revision {
		return nil, nil
	}
	out := map[string]TableRecord{}
	for _, g := range l.Records {
		for _, name := range g.Names {
			out[name] = TableRecord{Since: g.Since, Why: g.Why}
		}
	}
	return out, nil
}
