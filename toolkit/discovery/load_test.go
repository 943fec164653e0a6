package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/internal/tabletest"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// waitFor bounds every wait on the watcher.
const waitFor = 10 * time.Second

// kubeletVolume writes a directory the way kubelet's atomic writer updates a
// ConfigMap or projected volume: each version goes into a new timestamped
// directory, a ..data_tmp symlink to it is renamed over ..data, the
// user-visible symlinks to ..data/<key> are added, and the old version is
// removed.
type kubeletVolume struct {
	dir string
	n   atomic.Int64
}

func (v *kubeletVolume) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	ts := fmt.Sprintf("..2026_11_30_03_00_%02d.%09d", v.n.Add(1), time.Now().Nanosecond())
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, b := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, k), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k := range files {
		link := filepath.Join(v.dir, k)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(v.dir)
	for _, e := range entries {
		if _, keep := files[e.Name()]; !keep && !strings.HasPrefix(e.Name(), "..") {
			os.Remove(filepath.Join(v.dir, e.Name()))
		}
	}
}

func writeFile(dir, name string, b []byte) error {
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

func encode(t testing.TB, tools []spec.TableTool) (map[string][]byte, string, int) {
	t.Helper()
	parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, "toolplane-tools")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range parts {
		for k, v := range p.Data {
			files[k] = []byte(v)
		}
		for k, v := range p.BinaryData {
			files[k] = v
		}
	}
	return files, spec.TableRevision(tools), len(parts)
}

// logSink collects log messages for a test to wait on.
type logSink struct{ msgs chan string }

func (s logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s logSink) Handle(_ context.Context, r slog.Record) error {
	select {
	case s.msgs <- r.Message:
	default:
	}
	return nil
}
func (s logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s logSink) WithGroup(string) slog.Handler      { return s }

func TestWatchDirFollowsKubeletSwap(t *testing.T) {
	vol := &kubeletVolume{dir: t.TempDir()}
	small, rev1, _ := encode(t, tabletest.Tools(20))
	vol.write(t, small)

	changes := make(chan string, 16)
	logs := logSink{msgs: make(chan string, 64)}
	c := &discovery.Client{
		Logger:   slog.New(logs),
		OnChange: func(tb *spec.Table) { changes <- tb.Revision },
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.WatchDir(ctx, vol.dir) }()

	expectChange := func(want string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("loaded revision %s, want %s", got, want)
			}
			if c.Revision() != want {
				t.Fatalf("client revision %s after loading %s", c.Revision(), want)
			}
		case <-time.After(waitFor):
			t.Fatalf("no reload to %s within %s", want, waitFor)
		}
	}
	expectChange(rev1)

	// A table large enough for the split form: the swap brings new keys.
	big := tabletest.Tools(1500)
	split, rev2, n := encode(t, big)
	if n < 2 {
		t.Fatalf("%d ConfigMap(s): the test wants a split table", n)
	}
	vol.write(t, split)
	expectChange(rev2)
	if got, ok := c.Lookup(big[1234].Name); !ok || got.SourceName != big[1234].SourceName {
		t.Fatalf("Lookup(%s) after the swap = %v, %v", big[1234].Name, got.Name, ok)
	}

	// kubelet has refreshed the index's ConfigMap but not part 1 yet.
	next, rev3, _ := encode(t, tabletest.Tools(1600))
	torn := map[string][]byte{}
	for k, b := range next {
		torn[k] = b
	}
	nextIdx, err := spec.ParseTableIndex(next[spec.TableIndexKey])
	if err != nil {
		t.Fatal(err)
	}
	splitIdx, err := spec.ParseTableIndex(split[spec.TableIndexKey])
	if err != nil {
		t.Fatal(err)
	}
	delete(torn, nextIdx.Parts[1].Key)
	torn[splitIdx.Parts[1].Key] = split[splitIdx.Parts[1].Key]
	vol.write(t, torn)
	deadline := time.After(waitFor)
	for refused := false; !refused; {
		select {
		case msg := <-logs.msgs:
			refused = strings.HasPrefix(msg, "Kept the last good tool table")
		case rev := <-changes:
			t.Fatalf("a torn update was loaded as %s", rev)
		case <-deadline:
			t.Fatal("the torn update was neither refused nor loaded")
		}
	}
	if c.Revision() != rev2 || len(c.Table().Tools) != len(big) {
		t.Fatalf("after a torn update the client has %s (%d tools), want the last good %s", c.Revision(), len(c.Table().Tools), rev2)
	}

	// The rest arrives with kubelet's next swap.
	vol.write(t, next)
	expectChange(rev3)

	// Back to the plain form; stale parts are gone from the volume.
	vol.write(t, small)
	expectChange(rev1)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchDir returned %v after cancel, want nil", err)
		}
	case <-time.After(waitFor):
		t.Fatal("WatchDir did not return after cancel")
	}
}

func TestWatchDirPlainDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(tools []spec.TableTool) string {
		files, rev, n := encode(t, tools)
		if n != 1 {
			t.Fatalf("%d parts, want a plain table", n)
		}
		// Write and rename, as an editor or a sync tool does.
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, files[spec.TableKey], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, spec.TableKey)); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	rev1 := write(tabletest.Tools(3))
	changes := make(chan string, 16)
	c := &discovery.Client{Logger: slog.New(logSink{msgs: make(chan string, 64)}), OnChange: func(tb *spec.Table) { changes <- tb.Revision }}
	watchErr := make(chan error, 1)
	go func() { watchErr <- c.WatchDir(t.Context(), dir) }()
	t.Cleanup(func() {
		if err := <-watchErr; err != nil {
			t.Errorf("WatchDir: %v", err)
		}
	})
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("loaded %s, want %s", got, want)
			}
		case <-time.After(waitFor):
			t.Fatalf("no reload to %s", want)
		}
	}
	expect(rev1)
	expect(write(tabletest.Tools(4)))
}

func TestWatchDirMissing(t *testing.T) {
	c := &discovery.Client{}
	if err := c.WatchDir(t.Context(), filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("WatchDir on a missing directory returned nil")
	}
}

func TestReadDirBounds(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, spec.MaxTablePartBytes+1)
	if err := os.WriteFile(filepath.Join(dir, spec.TableKey), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.ReadDir(dir); !errors.Is(err, spec.ErrTableTooLarge) {
		t.Fatalf("oversized tools.json: err = %v, want ErrTableTooLarge", err)
	}
	if _, err := discovery.ReadDir(t.TempDir()); !errors.Is(err, spec.ErrTableMalformed) {
		t.Fatalf("empty directory: err = %v, want ErrTableMalformed", err)
	}
	c := &discovery.Client{}
	if err := c.LoadDir(dir); err == nil || c.Revision() != spec.TableRevision(nil) {
		t.Fatalf("LoadDir of a bad table: err = %v, revision %s; want an error and the empty table kept", err, c.Revision())
	}
}

// TestReadDir10k reads back the 10,000-tool table as an agent's projected
// volume holds it.
func TestReadDir10k(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes about 25 MB of JSON")
	}
	tools := tabletest.Tools(10_000)
	files, rev, n := encode(t, tools)
	vol := &kubeletVolume{dir: t.TempDir()}
	vol.write(t, files)
	c := &discovery.Client{}
	if err := c.LoadDir(vol.dir); err != nil {
		t.Fatal(err)
	}
	if c.Revision() != rev || len(c.Table().Tools) != len(tools) {
		t.Fatalf("read %d tools at %s from %d ConfigMaps, want %d at %s", len(c.Table().Tools), c.Revision(), n, len(tools), rev)
	}
	if got, ok := c.Lookup(tools[9999].Name); !ok || string(got.InputSchema) != string(tools[9999].InputSchema) {
		t.Fatalf("Lookup(%s): %v", tools[9999].Name, ok)
	}
}

func TestLoadBytes(t *testing.T) {
	files, rev, _ := encode(t, tabletest.Tools(5))
	c := &discovery.Client{}
	if err := c.LoadBytes(files[spec.TableKey]); err != nil {
		t.Fatal(err)
	}
	if c.Revision() != rev {
		t.Fatalf("revision %s, want %s", c.Revision(), rev)
	}
	if err := c.LoadBytes([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"a"},{"name":"a"}]}`)); !errors.Is(err, spec.ErrDuplicateTool) {
		t.Fatalf("duplicate names: err = %v, want ErrDuplicateTool", err)
	}
	if c.Revision() != rev {
		t.Fatal("a refused table replaced the good one")
	}
}
