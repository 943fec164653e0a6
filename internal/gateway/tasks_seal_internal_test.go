package gateway

import (
	"strings"
	"testing"
	"time"
)

// TestSealedTaskIDs: an id opens to what was sealed with the same key, and
// to nothing once altered anywhere, under another key, or expired; the
// largest id the gateway seals is within what it accepts.
func TestSealedTaskIDs(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	s, err := newTaskSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	st := &sealedTask{tool: "ts_slow", toolSet: "apps/ts", uid: "uid-1", backendID: "b-1", session: "s-1",
		caller: callerDigest("user:alice"), expires: now.Add(time.Hour), ttlMs: 3_600_000}
	id := s.seal(st)
	got := s.open(id, now)
	if got == nil || *got != *st {
		t.Fatalf("open gives %+v, want %+v", got, st)
	}
	if s.seal(st) == id {
		t.Fatal("two seals of one task are alike: the nonce is not fresh")
	}
	for i := len(taskIDPrefix); i < len(id); i++ {
		c := byte('A')
		if id[i] == 'A' {
			c = 'B'
		}
		if s.open(id[:i]+string(c)+id[i+1:], now) != nil {
			t.Fatalf("an id altered at %d opens", i)
		}
	}
	other, _ := newTaskSealer([]byte(strings.Repeat("o", 32)))
	if other.open(id, now) != nil {
		t.Fatal("an id opens under another key")
	}
	if s.open(id, now.Add(time.Hour)) != nil {
		t.Fatal("an expired id opens")
	}
	if _, err := newTaskSealer([]byte("short")); err == nil {
		t.Fatal("a short key is taken")
	}
	big := &sealedTask{tool: strings.Repeat("t", 128), toolSet: strings.Repeat("n", 63) + "/" + strings.Repeat("m", 253),
		uid: strings.Repeat("u", 36), backendID: strings.Repeat("b", maxBackendTaskID), session: strings.Repeat("s", maxBackendSession),
		expires: now.Add(time.Hour)}
	if id := s.seal(big); len(id) > maxTaskIDLen || s.open(id, now) == nil {
		t.Fatalf("the largest id is %d bytes, over %d, or does not open", len(id), maxTaskIDLen)
	}
}
