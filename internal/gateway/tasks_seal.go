package gateway

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// A task's id, as the gateway gives it to the client, seals what the
// gateway needs to reach the task again on any replica, with no store:
// the owner ToolSet and tool, the backend's own task id (and the backend
// session the task is bound to, for a 2025 server with sessions), a digest
// of the caller, and when the id expires. It is AES-256-GCM under a key
// every replica has (Options.TaskKey): a client can neither read the
// backend's id nor forge or alter one, and an id that does not open, has
// expired, or is another caller's is "not found" without a request to any
// backend.

// taskIDPrefix versions the sealed form.
const taskIDPrefix = "tpt1."

// Bounds of a sealed id and of what it holds.
const (
	// maxTaskIDLen bounds an id a client presents: longer ones are not
	// decoded at all.
	maxTaskIDLen = 2048
	// maxBackendTaskID and maxBackendSession bound the backend's task id
	// and session id the gateway seals; a backend that sends longer ones
	// fails the task's creation.
	maxBackendTaskID  = 256
	maxBackendSession = 256
)

// sealedTask is what a gateway task id holds.
type sealedTask struct {
	tool      string // the tool's name in the table
	toolSet   string // namespace/name
	uid       string // the ToolSet's UID, when the table has it
	backendID string // the backend's task id
	session   string // the backend session the task is bound to, or ""
	caller    [16]byte
	expires   time.Time // unix seconds
	ttlMs     int64     // the task's ttl as the client was told it
}

// taskSealer seals and opens task ids.
type taskSealer struct {
	aead cipher.AEAD
}

// taskKeyInfo separates the task key from any other use of the key
// material.
const taskKeyInfo = "toolplane gateway task id v1"

// newTaskSealer derives the sealing key from secret (at least 32 bytes);
// a nil secret gets a random key of this replica's own.
func newTaskSealer(secret []byte) (*taskSealer, error) {
	if secret == nil {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	if len(secret) < 32 {
		return nil, errors.New("the task key must be at least 32 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, taskKeyInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &taskSealer{aead: aead}, nil
}

// callerDigest is what an id holds of its caller: a digest of the caller's
// key (limitKeyOf), or zeros without authentication.
func callerDigest(key string) [16]byte {
	var d [16]byte
	if key == "" {
		return d
	}
	sum := sha256.Sum256([]byte("toolplane task caller\x00" + key))
	copy(d[:], sum[:16])
	return d
}

// seal returns the id of t.
func (s *taskSealer) seal(t *sealedTask) string {
	b := make([]byte, 0, 64+len(t.tool)+len(t.toolSet)+len(t.uid)+len(t.backendID)+len(t.session))
	b = binary.BigEndian.AppendUint64(b, uint64(t.expires.Unix()))
	b = binary.BigEndian.AppendUint64(b, uint64(t.ttlMs))
	b = append(b, t.caller[:]...)
	for _, f := range []string{t.tool, t.toolSet, t.uid, t.backendID, t.session} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(b)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, b, []byte(taskIDPrefix))
	return taskIDPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// open returns what id holds, or nil for an id that was not sealed with
// this key (forged, altered, another deployment's), or has expired at now.
func (s *taskSealer) open(id string, now time.Time) *sealedTask {
	rest, ok := strings.CutPrefix(id, taskIDPrefix)
	if !ok || len(id) > maxTaskIDLen {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return nil
	}
	nonce, sealed := raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():]
	b, err := s.aead.Open(nil, nonce, sealed, []byte(taskIDPrefix))
	if err != nil || len(b) < 32 {
		return nil
	}
	t := &sealedTask{
		expires: time.Unix(int64(binary.BigEndian.Uint64(b)), 0),
		ttlMs:   int64(binary.BigEndian.Uint64(b[8:])),
	}
	copy(t.caller[:], b[16:32])
	b = b[32:]
	fields := []*string{&t.tool, &t.toolSet, &t.uid, &t.backendID, &t.session}
	for _, f := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil
		}
		*f = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if !now.Before(t.expires) {
		return nil
	}
	return t
}

// maxTaskKeyBytes bounds a task key file.
const maxTaskKeyBytes = 4 << 10

// LoadTaskKey reads the task key (Options.TaskKey) from path: its bytes,
// without surrounding white space, at least 32 of them.
func LoadTaskKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxTaskKeyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTaskKeyBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxTaskKeyBytes)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 32 {
		return nil, fmt.Errorf("%s holds %d bytes; a task key is at least 32 (openssl rand -base64 48)", path, len(b))
	}
	return b, nil
}
