package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// DefaultTablePartGracePeriod is how long a chunk of the table stays after
// the index stopped naming it. It covers a reader that fetched the previous
// index and reads its chunks next, and a kubelet that projects a part
// ConfigMap from a fresher cache than the index's: watches deliver within
// seconds, and a kubelet that polls instead refreshes within a minute.
const DefaultTablePartGracePeriod = time.Minute

// errTableUnreadable means the stored table exists but does not decode.
var errTableUnreadable = errors.New("the stored tool table cannot be read back")

// tableStore is where the publisher keeps the table. read returns nil and no
// error when no table is stored. writeTools stores the table of tools (and their ledger records, in the same order), given
// by reference (the publisher's claims hold them, and they are only read),
// so that a write copies no tool; a positive wait asks to be called again
// after it, to finish what must wait for the grace period (the write
// itself, if a part has no room yet, or the removal of old chunks).
type tableStore interface {
	read(ctx context.Context) (*spec.Table, error)
	writeTools(ctx context.Context, tools []*spec.TableTool, records []spec.TableRecord) (wait time.Duration, err error)
	// storedBytes is the table's size as stored (its ConfigMaps' payload)
	// after the last write, 0 before one.
	storedBytes() int
}

// configMapTable stores the table in ConfigMaps, as [spec.TableEncoder] lays
// it out given the index stored now, so that a change to one tool writes
// one part ConfigMap and the base, and a writer stopped between any two of
// its writes leaves a table that reads back whole, old or new:
//
//  0. the chunks of the ledger that changed (see
//     [spec.TableLedgerChunkKey]) are written, in ConfigMaps of their own
//     that readers do not read: none for a change of content, the chunk of
//     each owner that gained or lost a name otherwise;
//  1. each new chunk is added, under its content-addressed key, to what its
//     ConfigMap holds: the index does not name it yet; a chunk the stored
//     index names is not written again;
//  2. the base ConfigMap, the index with chunk 0, is replaced in one write;
//  3. chunks the index no longer names are removed once grace has passed
//     since the store first saw them unnamed: by any write of their part,
//     or by one for them alone once the oldest is collectDelay past it;
//     a part ConfigMap left empty is deleted; so are the ledger's ConfigMaps left empty, or of a
//     ledger cut into another number of chunks, at once.
//
// Every write compares each chunk, of the table and of the ledger, with
// what is stored, so that one deleted or edited from outside is written
// again (the publisher's watch kicks a write for it).
//
// A part ConfigMap holds at most spec.MaxTablePartBytes. The encoder packs
// chunks into parts up to half of it, puts a replacement next to the
// chunks that stay with it, and in a burst of changes spreads new chunks
// over the spec.MaxTableParts-1 parts, counting the chunks in their grace
// (see spec.TableEncoder.Encode); only when no part has room does the
// write wait for a grace to pass. Part ConfigMaps left empty are deleted, so the numbering
// may have holes. Only the leader writes,
// and every update carries the resourceVersion it was computed from.
type configMapTable struct {
	client    client.Client
	reader    client.Reader
	namespace string
	name      string
	// grace is how long a chunk no index names stays readable, and
	// collectDelay how long past it a part waits to be written to drop
	// such chunks alone (see collect); the publisher's is half the grace.
	grace        time.Duration
	collectDelay time.Duration
	now          func() time.Time
	// maxParts, if set, bounds the ConfigMaps of the table (see
	// spec.TableStored.MaxParts).
	maxParts func() int
	// wrote, if set, is told the resourceVersion of every ConfigMap the
	// store writes ("" for one it deletes).
	wrote func(name, rv string)
	// stored, if set, is told every table that the stored ConfigMaps hold
	// once write has put it there (or found it there): what readers see.
	stored func(tools []*spec.TableTool)
	// gauges are set after each write; the registered ones if nil.
	gauges *tableGauges
	// size is the table's stored size after the last write.
	size atomic.Int64

	// encoder keeps the compressed segments of the last table written, so
	// that the next write compresses only what changed; ledger, the chunks
	// of the last ledger.
	encoder spec.TableEncoder
	ledger  spec.TableLedgerEncoder

	// unnamed records when each chunk ("ConfigMap/key") was first seen
	// that no stored index named. A new store starts its grace afresh,
	// since it cannot know when a reader last saw them named.
	unnamed map[string]time.Time

	// held is every ConfigMap of the table and of its ledger as the store
	// last read or wrote it, by name, so that list reads again only those
	// whose resourceVersion or UID moved (see list). heldMu guards it: the
	// ledger's chunks are written at once.
	heldMu sync.Mutex
	held   map[string]*corev1.ConfigMap
	// left is every ConfigMap under a reserved name that list found not
	// to be the table's (a stranger's: see adoptable), by its
	// resourceVersion and UID, so that it is not read again until it
	// moves. Only list touches it.
	left map[string]objectVersion
}

var _ tableStore = (*configMapTable)(nil)

func (s *configMapTable) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// note tells wrote, if set, of a write.
func (s *configMapTable) note(name, rv string) {
	if s.wrote != nil {
		s.wrote(name, rv)
	}
}

func (s *configMapTable) parts() int {
	if s.maxParts == nil {
		return spec.MaxTableParts
	}
	return s.maxParts()
}

func (s *configMapTable) read(ctx context.Context) (*spec.Table, error) {
	stored, ledger, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	if len(stored) == 0 {
		return nil, nil
	}
	t, err := spec.DecodeTableParts(partsOf(stored)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTableUnreadable, err)
	}
	// The records are what the ledger adds to the entries: a chunk that
	// does not read back leaves the entries as they are, its owners'
	// records starting afresh.
	if len(ledger) > 0 {
		t.Records, err = spec.DecodeTableLedgerChunks(t.Tools, s.name, partsOf(ledger)...)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "A chunk of the tool table's ledger cannot be read back; its owners' records start afresh")
		}
		return t, nil
	}
	// A table written before the ledger had chunks keeps it in the base.
	for _, cm := range stored {
		if cm.Name != s.name {
			continue
		}
		records, err := spec.DecodeTableLedger(cm.BinaryData[spec.TableLedgerKey], t.Revision)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "The tool table's ledger cannot be read back; its owners' records start afresh")
		}
		if len(records) > 0 {
			t.Records = make([]spec.TableRecord, len(t.Tools))
			for i := range t.Tools {
				t.Records[i] = records[t.Tools[i].Name]
			}
		}
	}
	return t, nil
}

func partsOf(cms []corev1.ConfigMap) []spec.TablePart {
	parts := make([]spec.TablePart, 0, len(cms))
	for _, cm := range cms {
		parts = append(parts, spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData})
	}
	return parts
}

// writeLedger writes the chunks of the ledger of tools that the stored
// ones do not hold as they are: none after a change of content alone, the
// one that holds a name whose owner changed. It returns the chunks, to be
// kept once the table is written, and the writes it made.
//
// The chunks go before the table: a record describes the owner the entry
// had when it was written, and one that the table does not follow is
// ignored, so a writer stopped between the two leaves a table whose
// ledger reads back, at worst without the records of the names that
// changed hands (and with the new UID of an owner created again under its
// name: the entries carry no UID, the records do).
func (s *configMapTable) writeLedger(ctx context.Context, tools []*spec.TableTool, records []spec.TableRecord, stored map[string]*corev1.ConfigMap) (map[string]bool, int, error) {
	keep := map[string]bool{}
	if len(records) == 0 {
		return keep, 0, nil
	}
	owned, chunks := 0, 0
	for _, r := range records {
		if r.Why != "" {
			owned++
		}
	}
	for name := range stored {
		if _, n, ok := spec.ParseTableLedgerName(s.name, name); ok {
			chunks = max(chunks, n)
		}
	}
	parts, err := s.ledger.Encode(tools, records, s.name, spec.TableLedgerChunks(owned, chunks))
	if err != nil {
		return nil, 0, fmt.Errorf("encoding the tool table's ledger: %w", err)
	}
	// The chunks are ConfigMaps of their own, written at once: a burst of
	// new owners changes most of them, and in a row their writes would hold
	// the table's for as many round trips.
	var changed []spec.TablePart
	for _, part := range parts {
		keep[part.Name] = true
		if cur := stored[part.Name]; cur == nil || !holds(cur, part) {
			changed = append(changed, part)
		}
	}
	written := make([]*corev1.ConfigMap, len(changed))
	var g errgroup.Group
	g.SetLimit(maxConcurrentLedgerWrites)
	for i, part := range changed {
		cur := stored[part.Name]
		g.Go(func() error {
			cm, err := s.put(ctx, cur, part.Name, part.Data, part.BinaryData)
			written[i] = cm
			return err
		})
	}
	err = g.Wait()
	wrote := 0
	for i, cm := range written {
		if cm != nil {
			stored[changed[i].Name] = cm
			wrote++
		}
	}
	if err != nil {
		return nil, wrote, err
	}
	return keep, wrote, nil
}

// maxConcurrentLedgerWrites bounds the chunks of the ledger written at once.
const maxConcurrentLedgerWrites = 8

// pruneLedger deletes the chunks of the ledger that keep does not name:
// chunks left empty, and those of a ledger cut into another number.
// Nobody reads them but a publisher, through the API, so none waits for a
// grace.
func (s *configMapTable) pruneLedger(ctx context.Context, stored map[string]*corev1.ConfigMap, keep map[string]bool) (int, error) {
	wrote := 0
	for _, name := range slices.Sorted(maps.Keys(stored)) {
		if keep[name] {
			continue
		}
		cm := stored[name]
		s.note(name, "")
		s.forget(name)
		if err := s.client.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return wrote, fmt.Errorf("deleting leftover chunk %s of the tool table's ledger: %w", name, err)
		}
		delete(stored, name)
		wrote++
	}
	return wrote, nil
}

// write is writeTools of t's tools and records.
func (s *configMapTable) write(ctx context.Context, t *spec.Table) (time.Duration, error) {
	tools := make([]*spec.TableTool, len(t.Tools))
	for i := range t.Tools {
		tools[i] = &t.Tools[i]
	}
	return s.writeTools(ctx, tools, t.Records)
}

func (s *configMapTable) writeTools(ctx context.Context, tools []*spec.TableTool, records []spec.TableRecord) (time.Duration, error) {
	list, ledgerList, err := s.list(ctx)
	if err != nil {
		return 0, err
	}
	stored := make(map[string]*corev1.ConfigMap, len(list))
	for i := range list {
		stored[list[i].Name] = &list[i]
	}
	ledger := make(map[string]*corev1.ConfigMap, len(ledgerList))
	for i := range ledgerList {
		ledger[ledgerList[i].Name] = &ledgerList[i]
	}
	now := s.clock()
	prev := storedIndex(stored[s.name])
	named := namedKeysOf(prev)
	s.age(stored, named, now)
	// The chunks the stored index names stay where they are, and new ones
	// go to parts with room, counting the chunks in their grace: see
	// spec.TableEncoder.Encode.
	parts, err := s.encoder.EncodeTools(tools, s.name, spec.TableStored{Index: prev, Grace: func(name string) int {
		return s.inGrace(stored[name], named, now)
	}, MaxParts: s.parts()})
	if err != nil {
		return 0, fmt.Errorf("encoding the tool table: %w", err)
	}
	keepLedger, wrote, err := s.writeLedger(ctx, tools, records, ledger)
	if err != nil {
		return 0, err
	}
	// The base alone does not say the table is whole: a part ConfigMap
	// deleted or edited from outside is written again, though the index
	// already names its chunks.
	if base := stored[s.name]; base == nil || !holds(base, parts[0]) || !holdsChunks(stored, parts[1:]) {
		for _, part := range parts[1:] {
			cm, wait, err := s.stage(ctx, stored[part.Name], part, named, now)
			if err != nil || wait > 0 {
				return wait, err
			}
			if cm != nil {
				stored[part.Name] = cm
				wrote++
			}
		}
		cm, err := s.put(ctx, stored[s.name], s.name, parts[0].Data, parts[0].BinaryData)
		if err != nil {
			return 0, err
		}
		stored[s.name] = cm
		wrote++
		// Chunks the old index named are unnamed from now on: from when
		// the new index was written, which readers got the old one until,
		// not from when the write began (a slow API server's write
		// shortened the grace by its own length).
		switched := s.clock()
		newly := namedKeys(cm)
		for ref := range named {
			if !newly[ref] {
				s.unnamed[ref] = switched
			}
		}
		named = newly
	}
	if s.stored != nil {
		s.stored(tools)
	}
	pruned, err := s.pruneLedger(ctx, ledger, keepLedger)
	wrote += pruned
	if err != nil {
		return 0, err
	}
	collected, wait, err := s.collect(ctx, stored, named, now)
	wrote += collected

	size, ledgerSize := 0, 0
	for _, part := range parts {
		size += part.StoredSize()
	}
	for name := range keepLedger {
		if cm := ledger[name]; cm != nil {
			ledgerSize += spec.TablePart{BinaryData: cm.BinaryData}.StoredSize()
		}
	}
	s.size.Store(int64(size))
	g := s.gauges
	if g == nil {
		g = registeredTableGauges
	}
	g.tools.Set(float64(len(tools)))
	g.bytes.Set(float64(size))
	g.jsonBytes.Set(float64(tableJSONSize(parts[0])))
	g.parts.Set(float64(len(parts)))
	if wrote > 0 {
		ctrl.LoggerFrom(ctx).Info("Published the tool table", "revision", writtenRevision(tools, parts[0]),
			"tools", len(tools), "parts", len(parts), "bytes", size, "ledgerChunks", len(keepLedger), "ledgerBytes", ledgerSize, "writes", wrote)
	}
	return wait, err
}

func (s *configMapTable) storedBytes() int { return int(s.size.Load()) }

// tableJSONSize is the length of the table's JSON: the index says it, and
// a table without one is its plain JSON.
func tableJSONSize(index spec.TablePart) int64 {
	if raw, ok := index.Data[spec.TableIndexKey]; ok {
		if idx, err := spec.ParseTableIndex([]byte(raw)); err == nil {
			return idx.Size
		}
		return 0
	}
	return int64(len(index.Data[spec.TableKey]))
}

// writtenRevision is the revision of the table written, for the log: the
// index has it, so that a large table is not encoded once more for a log
// line (which held a buffer the size of the table). A table small enough to
// have no index is hashed again.
func writtenRevision(tools []*spec.TableTool, index spec.TablePart) string {
	if raw, ok := index.Data[spec.TableIndexKey]; ok {
		if idx, err := spec.ParseTableIndex([]byte(raw)); err == nil {
			return idx.Revision
		}
	}
	if raw, ok := index.Data[spec.TableKey]; ok {
		var head struct {
			Revision string `json:"revision"`
		}
		if err := json.Unmarshal([]byte(raw), &head); err == nil {
			return head.Revision
		}
	}
	sorted := make([]spec.TableTool, len(tools))
	for i, t := range tools {
		sorted[i] = *t
	}
	spec.SortTableTools(sorted)
	return spec.TableRevision(sorted)
}

// inGrace returns the bytes, as stored, that stage would keep in cm besides
// the chunks the stored index names (which the encoder counts itself):
// chunks that no index names and whose grace has not passed, and the
// revision keys of a table written before chunks were content-addressed.
func (s *configMapTable) inGrace(cm *corev1.ConfigMap, named map[string]bool, now time.Time) int {
	if cm == nil {
		return 0
	}
	keep := spec.TablePart{Data: map[string]string{}, BinaryData: map[string][]byte{}}
	waiting := func(k string) bool {
		ref := cm.Name + "/" + k
		return !named[ref] && now.Sub(s.unnamed[ref]) < s.grace
	}
	for k, v := range cm.Data {
		if named[cm.Name+"/"+k] || waiting(k) {
			keep.Data[k] = v
		}
	}
	for k, v := range cm.BinaryData {
		if waiting(k) {
			keep.BinaryData[k] = v
		}
	}
	return keep.StoredSize()
}

// stage adds part's chunk to the ConfigMap cur, making room by dropping
// unnamed chunks past their grace. It returns the ConfigMap as written, nil
// if it already held the chunk, or how long to wait for room.
func (s *configMapTable) stage(ctx context.Context, cur *corev1.ConfigMap, part spec.TablePart, named map[string]bool, now time.Time) (*corev1.ConfigMap, time.Duration, error) {
	data, bin := map[string]string{}, map[string][]byte{}
	if cur != nil {
		maps.Copy(data, cur.Data)
		maps.Copy(bin, cur.BinaryData)
	}
	current := true
	for k, v := range part.BinaryData {
		if b, ok := bin[k]; !ok || string(b) != string(v) {
			current = false
		}
	}
	if current && cur != nil && cur.Labels[TableManagedByLabel] == tableManagedBy {
		return nil, 0, nil
	}

	var waiting []string // unnamed chunks still in their grace
	for k := range keysOf(data, bin) {
		ref := cur.Name + "/" + k
		if named[ref] {
			continue
		}
		if _, ok := part.BinaryData[k]; ok {
			continue
		}
		if now.Sub(s.unnamed[ref]) >= s.grace {
			delete(data, k)
			delete(bin, k)
			continue
		}
		waiting = append(waiting, k)
	}
	maps.Copy(bin, part.BinaryData)
	if (spec.TablePart{Data: data, BinaryData: bin}).StoredSize() > spec.MaxTablePartBytes {
		if len(waiting) > 0 {
			first := now.Add(s.grace)
			for _, k := range waiting {
				if at := s.unnamed[cur.Name+"/"+k].Add(s.grace); at.Before(first) {
					first = at
				}
			}
			ctrl.LoggerFrom(ctx).V(1).Info("Waiting for old chunks of the tool table to pass their grace", "configMap", part.Name, "chunks", len(waiting))
			return nil, max(first.Sub(now), time.Millisecond), nil
		}
		// Only chunks the stored index names block: a table written in the
		// older form, whose chunks fill a ConfigMap. This one write goes in
		// place, as writes did then.
		ctrl.LoggerFrom(ctx).Info("Replaced a part of the tool table in place to make room; readers may see it torn until the index is written", "configMap", part.Name)
		data, bin = map[string]string{}, maps.Clone(part.BinaryData)
	}
	cm, err := s.put(ctx, cur, part.Name, data, bin)
	return cm, 0, err
}

// collect removes the chunks that the index does not name and whose grace
// has passed, deleting a part ConfigMap left empty. A part is written for
// that alone once its oldest such chunk is collectDelay past its grace,
// and then loses every chunk past its grace: the writes of a stream of
// changes leave each part a chunk or more a write, and removed as each
// grace ended, they took a write of each part a write (105 writes of 22
// MB after bench-scale's churn at 5,000 ToolSets). A part written
// meanwhile drops them anyway (stage). It returns the writes made and how
// long until the next part is due.
func (s *configMapTable) collect(ctx context.Context, stored map[string]*corev1.ConfigMap, named map[string]bool, now time.Time) (int, time.Duration, error) {
	wrote := 0
	var next time.Duration
	delay := s.collectDelay
	for _, name := range slices.Sorted(maps.Keys(stored)) {
		cm := stored[name]
		if name == s.name {
			continue
		}
		data, bin := maps.Clone(cm.Data), maps.Clone(cm.BinaryData)
		removed, due := false, false
		var wait time.Duration // until this part is due
		for k := range keysOf(cm.Data, cm.BinaryData) {
			ref := name + "/" + k
			if named[ref] {
				continue
			}
			left := s.grace - now.Sub(s.unnamed[ref])
			if left+delay <= 0 {
				due = true
			} else if wait == 0 || left+delay < wait {
				wait = left + delay
			}
			if left > 0 {
				continue
			}
			delete(data, k)
			delete(bin, k)
			removed = true
		}
		if wait > 0 && (next == 0 || wait < next) {
			next = wait
		}
		if !due || !removed {
			continue
		}
		if len(data) == 0 && len(bin) == 0 {
			s.note(name, "")
			s.forget(name)
			if err := s.client.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				return wrote, 0, fmt.Errorf("deleting leftover tool table part %s: %w", name, err)
			}
			delete(stored, name)
		} else {
			updated, err := s.put(ctx, cm, name, data, bin)
			if err != nil {
				return wrote, 0, err
			}
			stored[name] = updated
		}
		wrote++
	}
	return wrote, next, nil
}

// age starts the grace of every chunk that no index names and the store has
// not seen before, and forgets chunks that are gone.
func (s *configMapTable) age(stored map[string]*corev1.ConfigMap, named map[string]bool, now time.Time) {
	if s.unnamed == nil {
		s.unnamed = make(map[string]time.Time)
	}
	seen := make(map[string]bool)
	for name, cm := range stored {
		if name == s.name {
			continue
		}
		for k := range keysOf(cm.Data, cm.BinaryData) {
			ref := name + "/" + k
			if named[ref] {
				continue
			}
			seen[ref] = true
			if _, ok := s.unnamed[ref]; !ok {
				s.unnamed[ref] = now
			}
		}
	}
	for ref := range s.unnamed {
		if !seen[ref] {
			delete(s.unnamed, ref)
		}
	}
}

// put creates the ConfigMap name, or updates cur, to hold exactly data and
// bin, labelled as the publisher's. An update carries cur's
// resourceVersion, so a concurrent writer makes it fail and the next attempt
// compares afresh.
func (s *configMapTable) put(ctx context.Context, cur *corev1.ConfigMap, name string, data map[string]string, bin map[string][]byte) (*corev1.ConfigMap, error) {
	if len(data) == 0 {
		data = nil
	}
	if len(bin) == 0 {
		bin = nil
	}
	if cur == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name, Labels: map[string]string{TableManagedByLabel: tableManagedBy}},
			Data:       data,
			BinaryData: bin,
		}
		if err := s.client.Create(ctx, cm); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// list read it and left it (see adoptable).
				return nil, fmt.Errorf("creating tool table part %s: a ConfigMap of that name exists in %s that is not the table's (it lacks the label %s=%s, and it is empty, holds keys the table does not write there, or has an owner, a finalizer or immutable data); the name is reserved for the tool table: rename or delete that ConfigMap: %w",
					name, s.namespace, TableManagedByLabel, tableManagedBy, err)
			}
			return nil, fmt.Errorf("creating tool table part %s: %w", name, err)
		}
		s.note(name, cm.ResourceVersion)
		s.hold(keepSent(cm, data, bin))
		return cm, nil
	}
	// Data and BinaryData are replaced: copying cur's would copy the
	// part's chunks only to drop them.
	cm := &corev1.ConfigMap{TypeMeta: cur.TypeMeta, ObjectMeta: *cur.ObjectMeta.DeepCopy(), Data: data, BinaryData: bin}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[TableManagedByLabel] = tableManagedBy
	if err := s.client.Update(ctx, cm); err != nil {
		return nil, fmt.Errorf("updating tool table part %s: %w", name, err)
	}
	s.note(name, cm.ResourceVersion)
	s.hold(keepSent(cm, data, bin))
	return cm, nil
}

// keepSent points cm, as the API server answered a write of data and bin,
// at data and bin again when it stored exactly them, and returns it. The
// answer is decoded into copies of every chunk, while the chunks sent are
// the encoder's, which it keeps for the next write, or the ones held
// before: the store held the table twice, 4.5 MB at the end of
// bench-scale's churn at 5,000 ToolSets. A ConfigMap that something
// changed on its way in (a mutating webhook) is held as stored. The maps
// are the store's own, made for the write, and nothing modifies a
// ConfigMap held or the bytes of a chunk.
func keepSent(cm *corev1.ConfigMap, data map[string]string, bin map[string][]byte) *corev1.ConfigMap {
	if maps.Equal(cm.Data, data) && maps.EqualFunc(cm.BinaryData, bin, bytes.Equal) {
		cm.Data, cm.BinaryData = data, bin
	}
	return cm
}

// hold records cm as the store wrote it.
func (s *configMapTable) hold(cm *corev1.ConfigMap) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if s.held == nil {
		s.held = make(map[string]*corev1.ConfigMap)
	}
	s.held[cm.Name] = cm
}

// forget drops name from what the store holds.
func (s *configMapTable) forget(name string) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	delete(s.held, name)
}

// list returns the ConfigMaps of the table as stored now: the base and every
// part named like one and labelled as the publisher's, in order; and the
// chunks of its ledger, labelled as the publisher's, by name.
//
// It reads from the API server, uncached, but only what moved: the
// ConfigMaps' metadata, then each one whose resourceVersion or UID is not
// that of the copy the store holds from its last read or write. A write of a
// 50,000-tool table read every part and chunk back, some 1.5 MB, three
// times over in buffers (the response, its envelope, the list), most of a
// churning manager's garbage; now the writes of the store itself cost
// nothing to read back, and one edited or deleted from outside is read
// again, or dropped, all the same.
func (s *configMapTable) list(ctx context.Context) (table, ledger []corev1.ConfigMap, err error) {
	var meta metav1.PartialObjectMetadataList
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.reader.List(ctx, &meta, client.InNamespace(s.namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing ConfigMaps of the tool table: %w", err)
	}
	s.heldMu.Lock()
	held := maps.Clone(s.held)
	s.heldMu.Unlock()
	live := make(map[string]*corev1.ConfigMap, len(meta.Items))
	left := make(map[string]objectVersion)
	for i := range meta.Items {
		m := &meta.Items[i].ObjectMeta
		if !s.reserved(m.Name) {
			continue
		}
		// The UID too: an object deleted and created again has a new
		// one, and a resourceVersion that is not unique (an etcd restored
		// without --bump-revision, a fake client) must not pass for it.
		// What the store holds, and what it left, is decided again only
		// once it moved.
		v := objectVersion{m.ResourceVersion, m.UID}
		if h := held[m.Name]; h != nil && (objectVersion{h.ResourceVersion, h.UID}) == v {
			live[m.Name] = h
			continue
		}
		if s.left[m.Name] == v {
			left[m.Name] = v
			continue
		}
		var cm corev1.ConfigMap
		if err := s.reader.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: m.Name}, &cm); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("reading ConfigMap %s of the tool table: %w", m.Name, err)
		}
		if s.ours(&cm.ObjectMeta) || s.adoptable(&cm) {
			live[cm.Name] = &cm
		} else {
			left[cm.Name] = objectVersion{cm.ResourceVersion, cm.UID}
		}
	}
	s.left = left
	s.heldMu.Lock()
	s.held = live
	s.heldMu.Unlock()
	for _, cm := range live {
		if _, ok := s.partIndex(cm.Name); ok {
			table = append(table, *cm)
		} else {
			ledger = append(ledger, *cm)
		}
	}
	slices.SortFunc(table, func(a, b corev1.ConfigMap) int {
		ia, _ := s.partIndex(a.Name)
		ib, _ := s.partIndex(b.Name)
		return ia - ib
	})
	slices.SortFunc(ledger, func(a, b corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
	return table, ledger, nil
}

// ours reports whether the ConfigMap of m is a part of the table or a chunk
// of its ledger: its name is one of theirs and it is labelled as the
// publisher's, but for the base, which always is the table's.
func (s *configMapTable) ours(m *metav1.ObjectMeta) bool {
	return s.reserved(m.Name) && (m.Name == s.name || m.Labels[TableManagedByLabel] == tableManagedBy)
}

// reserved reports whether name is one the table's parts or its ledger's
// chunks are written under (DESIGN.md: the parts have fixed names).
func (s *configMapTable) reserved(name string) bool {
	if _, ok := s.partIndex(name); ok {
		return true
	}
	_, _, ok := spec.ParseTableLedgerName(s.name, name)
	return ok
}

// objectVersion is an object's resourceVersion and UID: an object that
// moved, or was deleted and created again, has another.
type objectVersion struct {
	resourceVersion string
	uid             types.UID
}

// adoptable reports whether cm, under a reserved name but without the
// publisher's label, is the table's all the same: it holds keys, every one
// a key the table writes in a ConfigMap of its name (chunks in a part, the
// ledger's chunk in a ledger chunk), and nothing else claims it (no
// ownerReferences, no finalizers, not immutable). A part or ledger chunk
// whose label was removed or overwritten (by hand, or by a tool that sets
// the well-known app.kubernetes.io/managed-by itself) is read as the
// table's and labelled again at its next write; before, the store took it
// for a stranger's, and every write after tried to create it again and
// failed. Any other ConfigMap is a stranger's and is never written or
// deleted: creating the part fails, saying so (see put).
func (s *configMapTable) adoptable(cm *corev1.ConfigMap) bool {
	if len(cm.Data)+len(cm.BinaryData) == 0 || len(cm.OwnerReferences) > 0 || len(cm.Finalizers) > 0 ||
		(cm.Immutable != nil && *cm.Immutable) {
		return false
	}
	key := func(k string) bool { return k == spec.TableLedgerChunkKey }
	if i, ok := s.partIndex(cm.Name); ok && i > 0 {
		key = func(k string) bool { return strings.HasPrefix(k, spec.TableChunkKey("")) }
	} else if ok {
		return true // the base is always the table's
	}
	for k := range keysOf(cm.Data, cm.BinaryData) {
		if !key(k) {
			return false
		}
	}
	return true
}

// partIndex returns i if the ConfigMap name is part i of the table: 0 for
// the base, i for <base>-<i> up to <base>-63, the names DESIGN.md fixes.
func (s *configMapTable) partIndex(name string) (int, bool) {
	if name == s.name {
		return 0, true
	}
	suffix, ok := strings.CutPrefix(name, s.name+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(suffix)
	if err != nil || i < 1 || i >= spec.MaxTableParts || strconv.Itoa(i) != suffix {
		return 0, false
	}
	return i, true
}

// storedIndex returns the index in base; nil for the plain form or an
// unreadable index.
func storedIndex(base *corev1.ConfigMap) *spec.TableIndex {
	if base == nil {
		return nil
	}
	raw, ok := base.Data[spec.TableIndexKey]
	if !ok {
		return nil
	}
	idx, err := spec.ParseTableIndex([]byte(raw))
	if err != nil {
		return nil
	}
	return idx
}

// namedKeys returns the chunks, as "ConfigMap/key", that the index in base
// names; none for the plain form or an unreadable index.
func namedKeys(base *corev1.ConfigMap) map[string]bool {
	return namedKeysOf(storedIndex(base))
}

// namedKeysOf returns the chunks, as "ConfigMap/key", that idx names.
func namedKeysOf(idx *spec.TableIndex) map[string]bool {
	named := map[string]bool{}
	if idx == nil {
		return named
	}
	for i, p := range idx.Parts {
		named[p.ConfigMap+"/"+p.Key] = true
		if i > 0 && p.Key == spec.TablePartKey(i) {
			named[p.ConfigMap+"/"+spec.TablePartRevisionKey(i)] = true
		}
	}
	return named
}

// holdsChunks reports whether every chunk of parts is stored, as it is, in
// its ConfigMap, labelled as the publisher's.
func holdsChunks(stored map[string]*corev1.ConfigMap, parts []spec.TablePart) bool {
	for _, part := range parts {
		cm := stored[part.Name]
		if cm == nil || cm.Labels[TableManagedByLabel] != tableManagedBy {
			return false
		}
		for k, v := range part.BinaryData {
			if b, ok := cm.BinaryData[k]; !ok || string(b) != string(v) {
				return false
			}
		}
	}
	return true
}

// holds reports whether cm holds exactly part, labelled as the publisher's.
func holds(cm *corev1.ConfigMap, part spec.TablePart) bool {
	return cm.Labels[TableManagedByLabel] == tableManagedBy &&
		len(cm.Data) == len(part.Data) && maps.Equal(cm.Data, part.Data) &&
		maps.EqualFunc(cm.BinaryData, part.BinaryData, func(x, y []byte) bool { return string(x) == string(y) })
}

func keysOf(data map[string]string, bin map[string][]byte) map[string]struct{} {
	keys := make(map[string]struct{}, len(data)+len(bin))
	for k := range data {
		keys[k] = struct{}{}
	}
	for k := range bin {
		keys[k] = struct{}{}
	}
	return keys
}
