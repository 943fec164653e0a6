package spec

import "strings"

// DecodeMeter estimates, from JSON text as it streams past, the memory that
// encoding/json (or the MCP SDK's decoder) takes to decode it into any:
// map[string]any, []any, strings and boxed numbers. Such a decode costs up to
// some 50 times the text ({"a":0} is 7 bytes and over 300 decoded), so a
// byte limit alone does not bound it; the meter lets a reader refuse a reply
// before anything decodes it, at the cost of one pass over its bytes.
//
// The estimate is an upper bound for every shape of JSON (the tests hold it
// against what the decoder allocates): each value costs its slot in its
// parent, an object its map, an array its slice, a string its header and
// bytes. It does not validate: text that is not JSON is judged by its
// structural characters, and the decoder refuses it afterwards anyway.
//
// Line breaks end a string, as no valid JSON string holds one, so that the
// meter reads an SSE stream (lines of "data: <JSON>") as it reads plain
// JSON: no quote in a comment or field line can hide what the data lines
// hold.
//
// The zero value meters the whole text. With OnlyKey set, it meters only the
// values of object members of that name (at any depth), for a document whose
// other fields decode into typed or raw fields, such as the _meta of a
// [Document].
type DecodeMeter struct {
	// OnlyKey, when set, limits metering to the values of members with this
	// name, such as "_meta".
	OnlyKey string

	cost int64

	inString, escaped, inScalar bool
	// key holds the first bytes of the string being read, and keyLen its
	// length so far, to tell OnlyKey apart.
	key        []byte
	keyLen     int
	keyEscaped bool
	// lastKey says the last string read was OnlyKey; a ':' after it starts
	// a metered value.
	lastKey bool
	depth   int
	// metered says a metered value is being read, and from depth.
	metered bool
	from    int
}

// Per-value costs of a decode into any, in bytes, rounded up from what
// encoding/json and the MCP SDK's decoder (segmentio/encoding) allocate on
// 64-bit platforms: per {"a":0} 330 and 354, per [] 39 and 202, per ""
// 15 and 18, per 0 16 and 19 (see the tests).
const (
	costSlot   = 32  // the value's place in its parent map or slice, grown by doubling
	costObject = 320 // a map with its first group of slots
	costArray  = 192 // a slice, which segmentio allocates with room even when empty
	costString = 16  // a string's header, boxed; its bytes count one each
	costNumber = 16  // a boxed float64
)

// Write meters p. It never fails.
func (m *DecodeMeter) Write(p []byte) (int, error) {
	for _, c := range p {
		m.step(c)
	}
	return len(p), nil
}

// Cost returns the estimated bytes of decoding what was written so far.
func (m *DecodeMeter) Cost() int64 { return m.cost }

// DecodeCost returns the estimated bytes of decoding data into any, as a
// zero [DecodeMeter] meters it.
func DecodeCost(data []byte) int64 {
	var m DecodeMeter
	_, _ = m.Write(data)
	return m.cost
}

func (m *DecodeMeter) charge(n int64) {
	if m.OnlyKey == "" || m.metered {
		m.cost += n
	}
}

func (m *DecodeMeter) step(c byte) {
	if m.inString {
		switch {
		case c == '\n' || c == '\r':
			m.inString, m.escaped = false, false
		case m.escaped:
			m.escaped = false
			m.charge(1)
		case c == '\\':
			m.escaped, m.keyEscaped = true, true
		case c == '"':
			m.inString = false
			// encoding/json matches a member's name to a field without
			// regard to case, and after unescaping: "_META" and
			// "\u005fmeta" are _meta too. An escaped name is taken as
			// OnlyKey whatever it spells, which costs an estimate too high
			// at worst.
			m.lastKey = m.OnlyKey != "" && !m.metered &&
				(m.keyEscaped || m.keyLen == len(m.OnlyKey) && strings.EqualFold(string(m.key), m.OnlyKey))
		default:
			m.charge(1)
			m.keyByte(c)
		}
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		m.inScalar = false
		return
	case '"':
		m.inScalar = false
		m.inString = true
		m.key, m.keyLen, m.keyEscaped = m.key[:0], 0, false
		m.charge(costSlot + costString)
		return
	case ':':
		m.inScalar = false
		if m.lastKey {
			m.metered, m.from = true, m.depth
		}
		m.lastKey = false
		return
	case '{', '[':
		m.inScalar, m.lastKey = false, false
		m.charge(costSlot)
		if c == '{' {
			m.charge(costObject)
		} else {
			m.charge(costArray)
		}
		m.depth++
		return
	case '}', ']', ',':
		m.inScalar, m.lastKey = false, false
		if c != ',' {
			m.depth--
		}
		if m.metered && m.depth <= m.from && (c == ',' || m.depth < m.from) {
			m.metered = false
		}
		return
	}
	m.lastKey = false
	// A number or a literal (true, false, null): charged at its first byte.
	if !m.inScalar {
		m.inScalar = true
		m.charge(costSlot + costNumber)
	}
}

func (m *DecodeMeter) keyByte(c byte) {
	if m.OnlyKey == "" || m.metered {
		return
	}
	m.keyLen++
	if len(m.key) < len(m.OnlyKey) {
		m.key = append(m.key, c)
	}
}
