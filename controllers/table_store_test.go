package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// errWriterStopped is what a stopped writer's client answers.
var errWriterStopped = errors.New("the writer was stopped here")

// stoppingClient is a client on the test API server that makes the first
// limit ConfigMap writes (every write when limit is 0), refuses every later
// one as if the writer had been killed there, and calls after once each
// write it made has taken effect.
func stoppingClient(writes *writeLog, limit int, after func(client.Object)) (c client.Client, stopped <-chan struct{}) {
	GinkgoHelper()
	inner, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	var (
		mu   sync.Mutex
		made int
		once sync.Once
	)
	ch := make(chan struct{})
	write := func(verb string, obj client.Object, do func() error) error {
		mu.Lock()
		defer mu.Unlock()
		if limit > 0 && made == limit {
			once.Do(func() { close(ch) })
			return errWriterStopped
		}
		if err := writes.record(verb, obj, do); err != nil {
			return err
		}
		made++
		after(obj)
		return nil
	}
	return interceptor.NewClient(inner, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return write("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return write("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return write("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return write("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
	}), ch
}

// tableConfigMaps returns the ConfigMaps of the table "tools" in ns: those
// an agent's projected volume lists.
func tableConfigMaps(ctx context.Context, ns string) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := k8sClient.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	part := regexp.MustCompile(`^tools(-[0-9]+)?$`)
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if part.MatchString(cm.Name) {
			out = append(out, cm)
		}
	}
	return out, nil
}

// copyConfigMaps creates copies of cms in namespace ns: a stored table to
// write over, afresh for each run.
func copyConfigMaps(ctx context.Context, ns string, cms []corev1.ConfigMap) {
	GinkgoHelper()
	for _, cm := range cms {
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm.Name, Labels: cm.Labels},
			Data:       cm.Data, BinaryData: cm.BinaryData,
		})).To(Succeed())
	}
}

// readAsAgent reads the table in ns through toolkit/discovery, from a
// directory laid out as a projected volume of its ConfigMaps shows them.
func readAsAgent(ctx context.Context, ns, dir string) (*spec.Table, error) {
	cms, err := tableConfigMaps(ctx, ns)
	if err != nil {
		return nil, err
	}
	return readVolume(dir, agentVolume(cms))
}

// agentVolume returns the files that a projected volume of cms shows: every
// key of every ConfigMap, in order, a later one's over an earlier one's.
func agentVolume(cms []corev1.ConfigMap) map[string][]byte {
	files := map[string][]byte{}
	for _, cm := range cms {
		for k, v := range cm.Data {
			files[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			files[k] = v
		}
	}
	return files
}

// readVolume writes files to a new directory in dir and reads the table
// from it through toolkit/discovery, as an agent does.
func readVolume(dir string, files map[string][]byte) (*spec.Table, error) {
	vol, err := os.MkdirTemp(dir, "volume-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(vol)
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(vol, k), v, 0o600); err != nil {
			return nil, err
		}
	}
	return discovery.ReadDir(vol)
}

// volumeDigest is the SHA-256 of files, names and contents, in name order.
func volumeDigest(files map[string][]byte) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, k := range slices.Sorted(maps.Keys(files)) {
		for _, b := range [][]byte{[]byte(k), files[k]} {
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// agentVolumes remembers what readVolume read from each volume it was
// given, by volumeDigest: the read is a function of the files alone, so a
// volume read before reads the same again. The stopped-writer specs
// restart from the same stored table for every stop, and their writers
// pass through the same tables again and again; reading each whole again
// (about a second under the race detector) was most of their time.
type agentVolumes struct {
	mu   sync.Mutex
	read map[[sha256.Size]byte]agentRead
}

// agentRead is what an agent read from one volume.
type agentRead struct {
	revision string
	err      error
}

// readAsAgent is the package's readAsAgent, once per distinct volume.
func (v *agentVolumes) readAsAgent(ctx context.Context, ns, dir string) agentRead {
	cms, err := tableConfigMaps(ctx, ns)
	if err != nil {
		return agentRead{err: err}
	}
	files := agentVolume(cms)
	sum := volumeDigest(files)
	v.mu.Lock()
	defer v.mu.Unlock()
	if r, ok := v.read[sum]; ok {
		return r
	}
	var r agentRead
	t, err := readVolume(dir, files)
	if err != nil {
		r.err = err
	} else {
		r.revision = t.Revision
	}
	if v.read == nil {
		v.read = map[[sha256.Size]byte]agentRead{}
	}
	v.read[sum] = r
	return r
}

// storedRevision returns the revision that the index of the table in ns
// names, without reading the chunks.
func storedRevision(ctx context.Context, ns string) (string, error) {
	var cm corev1.ConfigMap
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &cm); err != nil {
		return "", err
	}
	idx, err := spec.ParseTableIndex([]byte(cm.Data[spec.TableIndexKey]))
	if err != nil {
		return "", err
	}
	return idx.Revision, nil
}

// settled reports whether the table in ns holds nothing but what its index
// names: the grace of every old chunk has passed and it is gone.
func settled(ctx context.Context, ns string) (bool, error) {
	cms, err := tableConfigMaps(ctx, ns)
	if err != nil {
		return false, err
	}
	var base *corev1.ConfigMap
	for i := range cms {
		if cms[i].Name == "tools" {
			base = &cms[i]
		}
	}
	named := namedKeys(base)
	for _, cm := range cms {
		if cm.Name == "tools" {
			continue
		}
		for k := range keysOf(cm.Data, cm.BinaryData) {
			if !named[cm.Name+"/"+k] {
				return false, nil
			}
		}
	}
	return base != nil, nil
}

// agentReads records what an agent read after each write.
type agentReads struct {
	// volumes reads the table, once per distinct volume; one for all the
	// runs of a spec.
	volumes *agentVolumes

	mu        sync.Mutex
	revisions map[string]int
	errs      []error
}

// after returns what a stoppingClient calls after each write: an agent's
// read of the table "tools" in ns, through a volume in dir, recorded in r.
// Agents never read the ledger's ConfigMaps, so a write of one leaves the
// table they read as it was and is not read after: reading the table again
// (about a second under the race detector, after each of dozens of ledger
// writes) made the specs outlast their bounds on a loaded runner.
func (r *agentReads) after(ctx context.Context, ns, dir string) func(client.Object) {
	return func(written client.Object) {
		if _, _, ledger := spec.ParseTableLedgerName("tools", written.GetName()); !ledger {
			r.add(r.volumes.readAsAgent(ctx, ns, dir))
		}
	}
}

func (r *agentReads) add(read agentRead) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if read.err != nil {
		r.errs = append(r.errs, read.err)
		return
	}
	r.revisions[read.revision]++
}

// recoverTimeout bounds each phase of a writer stopped and a new one
// taking over in the specs below: an agent reads the table whole after
// every write (about a second for thousands of tools under the race
// detector, the first time a volume is read, and some seconds on a loaded
// 2-core runner), a dozen times a phase. A
// clean-clone CI run of 8c2d7fd failed at bigTableTimeout (30 s): the new
// publisher's phase took 31 s.
const recoverTimeout = 2 * time.Minute

var _ = Describe("The tool table store", func() {
	It("leaves a split table that agents read whole, old or new, and a new publisher restores every owner, wherever its writer stops", func(ctx context.Context) {
		toolSets := newNamespace(ctx)
		create := func(name string) (types.NamespacedName, time.Time) {
			ts := minimalToolSet(toolSets, name)
			Expect(k8sClient.Create(ctx, ts)).To(Succeed())
			return client.ObjectKeyFromObject(ts), ts.CreationTimestamp.Time
		}
		a, aAt := create("a")
		b, bAt := create("b")
		c, cAt := create("c")
		// Names sort by ToolSet, so a's change touches every chunk.
		// The sizes are about the least that keeps both tables split as
		// the spec needs: the new one, 2,251 tools (1.5 MB of JSON), takes
		// 4 ConfigMaps, where one of 1,850 (1.2 MB) fits next to the index
		// alone; the old one, 3,301, takes 5. The loop below restarts the
		// writer once per write and reads the table whole after each, so it
		// costs in proportion to the table's size and its ConfigMaps: 5,501
		// tools in 8 took 16 writes and over 6 min under the race detector.
		aOld := append(noisyTools(a, "a", 1500), entry(a, "x", "x"))
		bTools := noisyTools(b, "b", 900)
		cTools := append(noisyTools(c, "c", 900), entry(c, "x", "x"), entry(c, "b_0000", "b_0000"))
		aNew := noisyTools(a, "a", 450)
		// The rule: b keeps b_0000 (it owns it, c is only a claimant); x
		// goes from a, which drops it, to c, the one claimant left.
		offerAll := func(p *runningPublisher, aTools []spec.TableTool) {
			p.offer(ctx, b, bAt, bTools...)
			p.offer(ctx, c, cAt, cTools...)
			p.offer(ctx, a, aAt, aTools...)
		}

		// The reference run: the old table, then the new one, from start.
		ref := newNamespace(ctx)
		p0, stop0 := startPublisher(ref, 0)
		p0.offer(ctx, a, aAt, aOld...)
		offerAll(p0, aOld)
		var oldTable *spec.Table
		var oldCMs []corev1.ConfigMap
		Eventually(func(g Gomega) {
			t, _, err := storedTable(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(len(aOld) + len(bTools) + len(cTools) - 2))
			g.Expect(settled(ctx, ref)).To(BeTrue())
			oldTable = t
			oldCMs, err = tableConfigMaps(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(bigTableTimeout).Should(Succeed())
		Expect(len(oldCMs)).To(BeNumerically(">=", 3), "the old table spans at least three ConfigMaps")
		Expect(harnessNames(oldTable)).To(HaveKeyWithValue("x", a.String()))

		p0.offer(ctx, a, aAt, aNew...)
		var newTable *spec.Table
		Eventually(func(g Gomega) {
			t, cms, err := storedTable(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Tools).To(HaveLen(len(aNew) + len(bTools) + len(cTools) - 1))
			g.Expect(settled(ctx, ref)).To(BeTrue())
			g.Expect(len(cms)).To(BeNumerically(">=", 2), "the new table is split too")
			g.Expect(len(cms)).To(BeNumerically("<", len(oldCMs)), "the new table has fewer parts, so a part is deleted")
			newTable = t
		}).WithTimeout(bigTableTimeout).Should(Succeed())
		stop0()
		Expect(harnessNames(newTable)).To(SatisfyAll(
			HaveKeyWithValue("x", c.String()),
			HaveKeyWithValue("b_0000", b.String()),
		))
		owners := func(t *spec.Table) map[types.NamespacedName][]string {
			out := map[types.NamespacedName][]string{}
			for _, tt := range t.Tools {
				ts := types.NamespacedName{Namespace: tt.ToolSet.Namespace, Name: tt.ToolSet.Name}
				out[ts] = append(out[ts], tt.Name)
			}
			return out
		}

		dir := GinkgoT().TempDir()
		volumes := &agentVolumes{}
		total := -1
		for k := 1; total < 0; k++ {
			By(fmt.Sprintf("stopping the writer after write %d", k))
			ns := newNamespace(ctx)
			copyConfigMaps(ctx, ns, oldCMs)
			reads := &agentReads{volumes: volumes, revisions: map[string]int{}}
			check := reads.after(ctx, ns, dir)

			writes := &writeLog{}
			cl, stopped := stoppingClient(writes, k, check)
			p1, stop1 := startPublisherWith(ns, toolSets, time.Hour, writes, cl)
			// b and c offer what they offered; the table does not change.
			p1.offer(ctx, b, bAt, bTools...)
			p1.offer(ctx, c, cAt, cTools...)
			p1.offer(ctx, a, aAt, aNew...)
			Eventually(func(g Gomega) {
				select {
				case <-stopped:
					return
				default:
				}
				g.Expect(storedRevision(ctx, ns)).To(Equal(newTable.Revision))
				g.Expect(settled(ctx, ns)).To(BeTrue())
				total = writes.count()
			}).WithTimeout(recoverTimeout).WithPolling(50 * time.Millisecond).Should(Succeed())
			stop1()

			// A new publisher against what the stopped one left.
			stored, _, err := storedTable(ctx, ns)
			Expect(err).NotTo(HaveOccurred(), "the table reads back after write %d", k)
			Expect(stored.Revision).To(BeElementOf(oldTable.Revision, newTable.Revision))
			writes2 := &writeLog{}
			cl2, _ := stoppingClient(writes2, 0, check)
			p2, _ := startPublisherWith(ns, toolSets, time.Hour, writes2, cl2)
			for ts, names := range owners(stored) {
				published, err := p2.Published(ctx, ts)
				Expect(err).NotTo(HaveOccurred())
				got := make([]string, 0, len(published))
				for _, t := range published {
					got = append(got, t.Name)
				}
				slices.Sort(got)
				slices.Sort(names)
				// Equal, not ConsistOf: matching thousands of elements
				// one to one takes ConsistOf seconds.
				Expect(got).To(Equal(names), "the owners of %s after write %d", ts, k)
			}
			offerAll(p2, aNew)
			Eventually(func(g Gomega) {
				g.Expect(storedRevision(ctx, ns)).To(Equal(newTable.Revision))
				g.Expect(settled(ctx, ns)).To(BeTrue())
			}).WithTimeout(recoverTimeout).WithPolling(50 * time.Millisecond).Should(Succeed())
			// Every write checked the table whole; this checks the last.
			final, _, err := storedTable(ctx, ns)
			Expect(err).NotTo(HaveOccurred())
			Expect(final.Revision).To(Equal(newTable.Revision))

			reads.mu.Lock()
			Expect(reads.errs).To(BeEmpty(), "an agent's read failed after write %d", k)
			for rev := range reads.revisions {
				Expect(rev).To(BeElementOf(oldTable.Revision, newTable.Revision))
			}
			reads.mu.Unlock()
		}
		Expect(total).To(BeNumerically(">=", 4), "staging, the index and the clean-up are each a write")
		GinkgoWriter.Printf("Stopped the writer after each of its %d writes\n", total)
	})
})

var _ = Describe("The tool table store's grace period", func() {
	It("keeps the chunks of the previous index readable until grace has passed, and a third revision waits for room when every part is full", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns, Name: "big"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		store := &configMapTable{
			client: k8sClient, reader: k8sClient, namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now },
		}
		table := func(n int) *spec.Table { return &spec.Table{Tools: noisyTools(ts, fmt.Sprintf("v%d", n), 3000)} }
		write := func(t *spec.Table) time.Duration {
			GinkgoHelper()
			wait, err := store.write(ctx, t)
			Expect(err).NotTo(HaveOccurred())
			return wait
		}
		revision := func() string {
			GinkgoHelper()
			rev, err := storedRevision(ctx, ns)
			Expect(err).NotTo(HaveOccurred())
			return rev
		}
		t1, t2, t3 := table(1), table(2), table(3)
		Expect(write(t1)).To(BeZero(), "nothing to clean up after the first write")
		rev1 := revision()
		cms, err := tableConfigMaps(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(cms)).To(BeNumerically(">=", 2), "the table is split")
		var index1 corev1.ConfigMap
		for _, cm := range cms {
			if cm.Name == "tools" {
				index1 = cm
			}
		}

		Expect(write(t2)).To(Equal(time.Minute), "the old chunks wait out their grace")
		rev2 := revision()
		Expect(rev2).NotTo(Equal(rev1))
		// A reader that fetched the first index reads its chunks whole.
		readOld := func() (*spec.Table, error) {
			cms, err := tableConfigMaps(ctx, ns)
			if err != nil {
				return nil, err
			}
			parts := []spec.TablePart{{Name: "tools", Data: index1.Data, BinaryData: index1.BinaryData}}
			for _, cm := range cms {
				if cm.Name != "tools" {
					parts = append(parts, spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData})
				}
			}
			return spec.DecodeTableParts(parts...)
		}
		old, err := readOld()
		Expect(err).NotTo(HaveOccurred())
		Expect(old.Revision).To(Equal(rev1))

		// A third revision within the grace, when every part is full, as
		// after a burst of changes: it waits for the grace of old chunks.
		now = now.Add(30 * time.Second)
		fillParts(ctx, ns)
		Expect(write(t3)).To(Equal(30*time.Second), "the write waits for the old chunks' grace")
		Expect(revision()).To(Equal(rev2), "the index did not move")
		_, err = readOld()
		Expect(err).NotTo(HaveOccurred(), "the previous index's chunks are still there")

		now = now.Add(30 * time.Second)
		Expect(write(t3)).To(Equal(30*time.Second), "the first index's chunks have passed their grace, but the parts are still full")
		Expect(revision()).To(Equal(rev2), "the index did not move")

		now = now.Add(30 * time.Second)
		Expect(write(t3)).To(Equal(time.Minute))
		Expect(revision()).NotTo(Equal(rev2))
		_, err = readOld()
		Expect(err).To(MatchError(spec.ErrTablePartMissing), "past their grace the first index's chunks are gone")
		got, err := readAsAgent(ctx, ns, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Tools).To(HaveLen(len(t3.Tools)))

		now = now.Add(time.Minute)
		Expect(write(t3)).To(BeZero())
		Expect(settled(ctx, ns)).To(BeTrue())
	})
})

var _ = Describe("The tool table store, upgrading", func() {
	It("replaces a table of numbered chunks and removes them after the grace", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns, Name: "big"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		store := &configMapTable{
			client: k8sClient, reader: k8sClient, namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now },
		}
		// The first table as an operator before content-addressed chunks
		// wrote it: chunk i under tools.part-<i>, its revision next to it.
		old := &spec.Table{Tools: noisyTools(ts, "old", 3000)}
		parts, err := spec.EncodeTable(old, "tools")
		Expect(err).NotTo(HaveOccurred())
		Expect(len(parts)).To(BeNumerically(">=", 2))
		idx, err := spec.ParseTableIndex([]byte(parts[0].Data[spec.TableIndexKey]))
		Expect(err).NotTo(HaveOccurred())
		chunks := map[string][]byte{}
		for _, p := range parts {
			maps.Copy(chunks, p.BinaryData)
		}
		for i := range idx.Parts {
			name := spec.TablePartName("tools", i)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{TableManagedByLabel: "toolplane"}},
				BinaryData: map[string][]byte{spec.TablePartKey(i): chunks[idx.Parts[i].Key]},
			}
			idx.Parts[i].Key = spec.TablePartKey(i)
			idx.Parts[i].ConfigMap = name
			if i > 0 {
				cm.Data = map[string]string{spec.TablePartRevisionKey(i): idx.Revision}
			}
			Expect(k8sClient.Create(ctx, cm)).To(Succeed())
		}
		base := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, base)).To(Succeed())
		ib, err := json.Marshal(idx)
		Expect(err).NotTo(HaveOccurred())
		base.Data = map[string]string{spec.TableIndexKey: string(ib)}
		Expect(k8sClient.Update(ctx, base)).To(Succeed())
		got, err := store.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Revision).To(Equal(idx.Revision))

		next := &spec.Table{Tools: noisyTools(ts, "new", 3000)}
		Expect(store.write(ctx, next)).To(Equal(time.Minute))
		got, err = readAsAgent(ctx, ns, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Tools).To(HaveLen(len(next.Tools)))
		Expect(settled(ctx, ns)).To(BeFalse(), "the numbered chunks and their revisions wait out the grace")

		now = now.Add(time.Minute)
		Expect(store.write(ctx, next)).To(BeZero())
		Expect(settled(ctx, ns)).To(BeTrue())
		cms, err := tableConfigMaps(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		for _, cm := range cms {
			Expect(cm.Data).NotTo(HaveKey(ContainSubstring(".revision")), cm.Name)
		}
	})
})

// fillParts adds to every part ConfigMap name of the table "tools" in ns,
// creating it if need be, a key that no index names and that leaves less
// room than any chunk takes, as a burst of changes would leave them.
func fillParts(ctx context.Context, ns string) {
	GinkgoHelper()
	for i := 1; i < spec.MaxTableParts; i++ {
		name := spec.TablePartName("tools", i)
		sum := sha512.Sum512([]byte(name))
		junk := bytes.Repeat(sum[:], (spec.MaxTablePartBytes-40<<10)*3/4/len(sum))
		key := spec.TableChunkKey(hex.EncodeToString(sum[:32]))
		var cm corev1.ConfigMap
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)
		if apierrors.IsNotFound(err) {
			Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{TableManagedByLabel: tableManagedBy}},
				BinaryData: map[string][]byte{key: junk},
			})).To(Succeed())
			continue
		}
		Expect(err).NotTo(HaveOccurred())
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[key] = junk
		Expect(k8sClient.Update(ctx, &cm)).To(Succeed())
	}
}

// noisyTools is manyTools whose descriptions compress even less, so that a
// split table takes fewer tools.
func noisyTools(ts types.NamespacedName, prefix string, n int) []spec.TableTool {
	tools := manyTools(ts, prefix, n)
	for j := range tools {
		sum := sha512.Sum512([]byte(tools[j].Description))
		more := sha512.Sum512(sum[:])
		tools[j].Description += " See " + hex.EncodeToString(sum[:]) + hex.EncodeToString(more[:]) + "."
	}
	return tools
}

// harnessNames returns name → owner "namespace/name" of t.
func harnessNames(t *spec.Table) map[string]string {
	out := make(map[string]string, len(t.Tools))
	for _, tt := range t.Tools {
		out[tt.Name] = tt.ToolSet.String()
	}
	return out
}
