package gateway

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// redteamManyNumbers is a tool result of about size bytes as a toolkit
// workload may send it: one text block with a newline (a backslash in the
// JSON), and structuredContent of many one-digit numbers.
func redteamManyNumbers(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"content":[{"type":"text","text":"line one\nline two"}],"structuredContent":[0`)
	for b.Len() < size-4 {
		b.WriteString(",0")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// BenchmarkRedTeamRedactResultOfManyNumbers: what redaction costs per call
// of a 4 MiB result (the default MaxResultBytes) whose ToolSet has a
// token: the result as roundTrip decodes it, then redactResult as call
// runs it.
func BenchmarkRedTeamRedactResultOfManyNumbers(b *testing.B) {
	raw := redteamManyNumbers(4 << 20)
	be := &backend{token: "a-token-that-is-never-echoed"}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		res, err := decodeResult(raw)
		if err != nil {
			b.Fatal(err)
		}
		_ = be.redactResult(res, 4<<20)
	}
}

// Attack 2, on an ordinary call of a toolkit workload: roundTrip keeps
// structuredContent as the workload's raw JSON (decodeTextResult), and
// redactResult passes the result on as it is when redactJSON's walk finds
// no token; with the member repeated, the walk sees only the last.
func TestRedTeam2DuplicateStructuredContentKeyPassesUnredacted(t *testing.T) {
	const token = "tok-0f9e8d7c6b5a4321"
	// A workload that writes its JSON by hand, echoing the caller's
	// argument into it: the caller sent `x","auth":"none`.
	raw := []byte(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"auth":"Bearer ` + token + `","echo":"x","auth":"none"}}`)
	res, err := decodeResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	be := &backend{token: token}
	shown, _ := json.Marshal(be.redactResult(res, 4<<20))
	if strings.Contains(string(shown), token) {
		t.Errorf("the result shown holds the token: %s", shown)
	}
}

// Attack 4. redact leaves its own marks as they are: it splits the text on
// "[redacted]" and redacts each piece. A token that begins with the
// mark's end ("]…", "d]…") or ends with its start ("…[", "…[r") is cut by
// that split when the text before (after) it reads "[redacte" ("redacted]"):
// no piece holds it, and the text is passed on with the token whole.
// credentials.Load refuses only CR, LF and NUL; a generated password
// begins with ']' or ends with '[' about once in fifty. A caller whose
// input a workload writes next to its token sends the rest of the mark.
func TestRedTeam2TokenAgainstTheMarkIsNotRedacted(t *testing.T) {
	for _, token := range []string{"]Zq8&k2!pW", "Zq8&k2!pW["} {
		be := &backend{token: token}
		for _, s := range []string{"key=[redacted" + token + "&q=1", "key=" + token + "redacted]"} {
			if !strings.Contains(s, token) {
				continue
			}
			if got := be.redact(s); strings.Contains(got, token) {
				t.Errorf("token %q: redact(%q) = %q", token, s, got)
			}
			raw, _ := json.Marshal(map[string]string{"text": s})
			if red, ok := be.redactJSON(raw, 1<<20); ok && strings.Contains(string(red), token) {
				t.Errorf("token %q: redactJSON(%s) = %s", token, raw, red)
			}
		}
	}
}

// Attack 5. redactJSON decodes any reply that holds a backslash (a "\n" in
// a text block is enough) into map[string]any: a 4 MiB result of small
// numbers is two million interface values, about sixty times its size, on
// the heap of one call, none of it charged to MaxResultMemory (8 MiB for
// every call in flight). At 2d1bd0e the same call allocated under four
// times the result (json.Marshal and a byte search).
func TestRedTeam2RedactionAllocatesAFewTimesTheResult(t *testing.T) {
	raw := redteamManyNumbers(4 << 20)
	be := &backend{token: "a-token-that-is-never-echoed"}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := decodeResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = be.redactResult(res, 4<<20)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 8*uint64(len(raw)) {
		t.Errorf("a %d-byte result allocated %d bytes (%.0f times) to be found free of the token", len(raw), n, float64(n)/float64(len(raw)))
	}
}

// A one-letter token repeated through a 4 MiB string: its redaction is ten
// times the string, and redactJSON built it (40 MiB) before it compared it
// with the limit. It is refused from the count now, having decoded the
// string once and built nothing more.
func TestRedactJSONRefusesAShortTokensGrowthBeforeBuildingIt(t *testing.T) {
	be := &backend{token: "q"}
	raw := []byte(`{"text":"` + strings.Repeat("q", 4<<20) + `"}`)
	var red []byte
	var ok bool
	allocs := testing.AllocsPerRun(1, func() { red, ok = be.redactJSON(raw, 4<<20) })
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	_, _ = be.redactJSON(raw, 4<<20)
	runtime.ReadMemStats(&m)
	if ok || red != nil {
		t.Fatalf("a redaction of %d bytes was not withheld", 10*len(raw))
	}
	if grew := m.TotalAlloc - before; grew > 2*uint64(len(raw)) {
		t.Errorf("refusing it allocated %d bytes (%.0f allocations), more than twice the %d of the reply", grew, allocs, len(raw))
	}
}
