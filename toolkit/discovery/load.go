package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// dataLink is the symlink through which kubelet publishes a ConfigMap volume:
// it points at a timestamped directory holding one version of every key, and
// an update renames a new link over it.
const dataLink = "..data"

// ReadDir reads the tool table mounted in dir, in any form that
// spec.EncodeTable writes. dir is a ConfigMap or projected volume (see
// spec.TableKey for how to mount the parts of a large table) or any directory
// holding the table's keys as files. Under kubelet's layout, ReadDir reads
// the version that ..data points at, so a concurrent update cannot mix two
// versions of the volume. It reads only the files that the index names, so
// the chunks of another revision next to them cost nothing. Each file is
// bounded by spec.MaxTablePartBytes.
func ReadDir(dir string) (*spec.Table, error) {
	base := dir
	if target, err := os.Readlink(filepath.Join(dir, dataLink)); err == nil {
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		base = target
	}
	read := func(name string) ([]byte, error) {
		return readBounded(filepath.Join(base, name), spec.MaxTablePartBytes)
	}
	files := make(map[string][]byte)
	ib, err := read(spec.TableIndexKey)
	switch {
	case err == nil:
		files[spec.TableIndexKey] = ib
		idx, err := spec.ParseTableIndex(ib)
		if err != nil {
			return nil, err
		}
		for _, key := range idx.Keys() {
			b, err := read(key)
			if errors.Is(err, fs.ErrNotExist) {
				continue // DecodeTable names what is missing.
			}
			if err != nil {
				return nil, fmt.Errorf("reading tool table: %w", err)
			}
			files[key] = b
		}
	case errors.Is(err, fs.ErrNotExist):
		b, err := read(spec.TableKey)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading tool table: %w", err)
		}
		if err == nil {
			files[spec.TableKey] = b
		} else if _, err := os.Stat(base); err != nil {
			return nil, fmt.Errorf("reading tool table: %w", err)
		}
	default:
		return nil, fmt.Errorf("reading tool table: %w", err)
	}
	return spec.DecodeTable(files)
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is over %d bytes", spec.ErrTableTooLarge, path, limit)
	}
	return b, nil
}

// LoadDir replaces the client's table with the one mounted in dir; see
// [ReadDir].
func (c *Client) LoadDir(dir string) error {
	t, err := ReadDir(dir)
	if err != nil {
		return err
	}
	return c.SetTable(t)
}

// WatchDir follows the table mounted in dir until ctx is done: it loads it,
// then reloads it whenever kubelet swaps in a new version of the volume (or,
// in a plain directory, whenever a table file changes). An update that
// cannot be read, typically a torn one while kubelet has refreshed only some
// of a split table's ConfigMaps, is logged and the last good table kept;
// kubelet's next swap brings the rest. Each new revision is passed to
// OnChange.
//
// WatchDir returns nil when ctx is done, and an error only if dir cannot be
// watched. To fail fast on a missing table at start-up, call
// [Client.LoadDir] first.
func (c *Client) WatchDir(ctx context.Context, dir string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching tool table: %w", err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching tool table in %s: %w", dir, err)
	}
	// Load only once the watch is in place, so that no update falls
	// between the two.
	c.reload(dir)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("discovery: watcher closed")
			}
			if !relevant(ev) {
				continue
			}
			// One update is a burst of events; read the table once.
			drain(w.Events)
			c.reload(dir)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("discovery: watcher closed")
			}
			c.logger().Warn("Watching the tool table failed", "dir", dir, "err", err)
		}
	}
}

// relevant tells kubelet's swap of ..data and changes to the table's own
// files from kubelet's other bookkeeping (..data_tmp, timestamped
// directories).
func relevant(ev fsnotify.Event) bool {
	name := filepath.Base(ev.Name)
	if name == dataLink {
		return ev.Has(fsnotify.Create)
	}
	return !strings.HasPrefix(name, "..") && !ev.Has(fsnotify.Chmod)
}

func drain(events <-chan fsnotify.Event) {
	for {
		select {
		case <-events:
		default:
			return
		}
	}
}

func (c *Client) reload(dir string) {
	t, err := ReadDir(dir)
	if err != nil {
		c.logger().Warn("Kept the last good tool table: the update could not be read",
			"dir", dir, "revision", c.Revision(), "err", err)
		return
	}
	if t.Revision == c.Revision() && c.state.Load() != nil {
		return
	}
	if err := c.SetTable(t); err != nil {
		c.logger().Warn("Kept the last good tool table: the update is invalid",
			"dir", dir, "revision", c.Revision(), "err", err)
		return
	}
	c.logger().Info("Loaded the tool table", "dir", dir, "revision", t.Revision, "tools", len(t.Tools))
	if c.OnChange != nil {
		c.OnChange(t)
	}
}
