package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// writeCost sums what a list of writes cost: the part ConfigMaps written
// (the base aside), and the bytes of every object created or updated, as the
// API server stores them.
type writeCost struct {
	parts   []string
	base    int
	bytes   int
	deletes int
}

func costOf(writes []tableWrite) writeCost {
	var c writeCost
	for _, w := range writes {
		if w.verb == "delete" {
			c.deletes++
			continue
		}
		n := spec.TablePart{Data: w.cm.Data, BinaryData: w.cm.BinaryData}.StoredSize()
		c.bytes += n
		if w.cm.Name == "tools" {
			c.base += n
			continue
		}
		if !slices.Contains(c.parts, w.cm.Name) {
			c.parts = append(c.parts, w.cm.Name)
		}
	}
	return c
}

// tenMiB returns a table of about 10 MiB of JSON: the size at which a
// change to one tool must write at most two parts plus the index.
func tenMiB(ts types.NamespacedName) []spec.TableTool {
	return noisyTools(ts, "t", 16000)
}

var _ = Describe("The tool table store, writing a large table", func() {
	DescribeTable("writes in proportion to the change: one tool changed, added or removed costs at most two part ConfigMaps and the index", func(ctx context.Context, tenMiB func(types.NamespacedName) []spec.TableTool) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns, Name: "big"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		writes := &writeLog{}
		store := &configMapTable{
			client: countingClient(writes), reader: k8sClient, namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now },
		}
		write := func(tools []spec.TableTool) time.Duration {
			GinkgoHelper()
			wait, err := store.write(ctx, &spec.Table{Tools: tools})
			Expect(err).NotTo(HaveOccurred())
			return wait
		}
		readsAs := func(tools []spec.TableTool) {
			GinkgoHelper()
			got, err := readAsAgent(ctx, ns, GinkgoT().TempDir())
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Revision).To(Equal(spec.TableRevision(sorted(tools))))
		}

		tools := tenMiB(ts)
		Expect(write(tools)).To(BeZero())
		readsAs(tools)
		idx, err := spec.ParseTableIndex([]byte(mustGetBase(ctx, ns).Data[spec.TableIndexKey]))
		Expect(err).NotTo(HaveOccurred())
		Expect(idx.Size).To(BeNumerically(">=", 10<<20), "the table is 10 MiB of JSON")
		full := costOf(writes.all())
		GinkgoWriter.Printf("%d tools, %d bytes of JSON: %d ConfigMaps, %d bytes stored\n", len(tools), idx.Size, len(full.parts)+1, full.bytes)

		mid := len(tools) / 2
		changes := []struct {
			name  string
			tools func([]spec.TableTool) []spec.TableTool
		}{
			{"a description", func(t []spec.TableTool) []spec.TableTool {
				t = slices.Clone(t)
				t[mid].Description += " Also archived ones."
				return t
			}},
			{"the same tool again, within the old chunk's grace", func(t []spec.TableTool) []spec.TableTool {
				t = slices.Clone(t)
				t[mid].Description += " And pending ones."
				return t
			}},
			{"a tool added", func(t []spec.TableTool) []spec.TableTool {
				return append(slices.Clone(t), entry(ts, "t_07777_b", "t_07777_b"))
			}},
			{"a tool removed", func(t []spec.TableTool) []spec.TableTool {
				return slices.Delete(slices.Clone(t), mid/3, mid/3+1)
			}},
		}
		var last []string // the parts the previous change wrote
		for i, c := range changes {
			By("changing " + c.name)
			within := i == 1
			if !within {
				// Past the grace of the previous change: settled.
				now = now.Add(2 * time.Minute)
				Expect(write(tools)).To(BeZero())
				Expect(settled(ctx, ns)).To(BeTrue())
			}
			base := mustGetBase(ctx, ns)
			baseSize := spec.TablePart{Data: base.Data, BinaryData: base.BinaryData}.StoredSize()
			before := writes.count()
			tools = c.tools(tools)
			wait := write(tools)
			readsAs(tools)
			cost := costOf(writes.all()[before:])
			Expect(cost.base).To(BeNumerically(">", 0), "the index is written")
			Expect(len(cost.parts)).To(BeNumerically("<=", 2), "part ConfigMaps written: %v", cost.parts)
			Expect(cost.bytes).To(BeNumerically("<=", 2*spec.MaxTablePartBytes+baseSize))
			GinkgoWriter.Printf("%s: wrote %v and the index, %d bytes (the whole table stores %d)\n", c.name, cost.parts, cost.bytes, full.bytes)
			if i == 0 {
				// The next change comes within this one's grace.
				Expect(wait).To(Equal(time.Minute), "the replaced chunk waits out its grace")
				last = cost.parts
				now = now.Add(10 * time.Second)
				continue
			}
			if within {
				Expect(wait).To(Equal(50*time.Second), "only the clean-up waits")
				GinkgoWriter.Printf("  the previous change wrote %v\n", last)
			} else {
				Expect(wait).To(Equal(time.Minute), "the replaced chunk waits out its grace")
			}

			// The clean-up after the grace rewrites what it removes from.
			now = now.Add(time.Minute)
			collectFrom := writes.count()
			Expect(write(tools)).To(BeZero())
			Expect(settled(ctx, ns)).To(BeTrue())
			readsAs(tools)
			clean := costOf(writes.all()[collectFrom:])
			Expect(clean.base).To(BeZero())
			Expect(len(clean.parts) + clean.deletes).To(BeNumerically("<=", 2))
			GinkgoWriter.Printf("  the clean-up: %d bytes in %d writes\n", clean.bytes, len(clean.parts)+clean.deletes)
		}
	},
		Entry("of tools that compress 3:1, a chunk to a part", tenMiB),
		Entry("of tools that compress 20:1, chunks packed in parts", func(ts types.NamespacedName) []spec.TableTool {
			tools := make([]spec.TableTool, 40000)
			for j := range tools {
				name := fmt.Sprintf("t_%05d", j)
				tools[j] = entry(ts, name, name)
			}
			return tools
		}),
	)

	It("puts a second and a third revision within the grace into empty parts, so they do not wait, and leaves holes in the numbering that agents read past", func(ctx context.Context) {
		ns := newNamespace(ctx)
		ts := types.NamespacedName{Namespace: ns, Name: "big"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		store := &configMapTable{
			client: k8sClient, reader: k8sClient, namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now },
		}
		write := func(t []spec.TableTool) time.Duration {
			GinkgoHelper()
			wait, err := store.write(ctx, &spec.Table{Tools: t})
			Expect(err).NotTo(HaveOccurred())
			return wait
		}
		partsOf := func() []string {
			GinkgoHelper()
			idx, err := spec.ParseTableIndex([]byte(mustGetBase(ctx, ns).Data[spec.TableIndexKey]))
			Expect(err).NotTo(HaveOccurred())
			var out []string
			for _, p := range idx.Parts[1:] {
				out = append(out, p.ConfigMap)
			}
			return out
		}
		t1, t2, t3 := noisyTools(ts, "v1", 3000), noisyTools(ts, "v2", 3000), noisyTools(ts, "v3", 3000)
		Expect(write(t1)).To(BeZero())
		index1 := mustGetBase(ctx, ns).DeepCopy()
		parts1 := partsOf()
		Expect(len(parts1)).To(BeNumerically(">=", 2))
		Expect(write(t2)).To(Equal(time.Minute))
		parts2 := partsOf()
		for _, cm := range parts2 {
			Expect(parts1).NotTo(ContainElement(cm), "new chunks go to empty parts")
		}

		now = now.Add(30 * time.Second)
		Expect(write(t3)).To(Equal(30*time.Second), "only the clean-up waits")
		Expect(storedRevision(ctx, ns)).To(Equal(spec.TableRevision(sorted(t3))), "the index moved")
		for _, cm := range partsOf() {
			Expect(append(parts1, parts2...)).NotTo(ContainElement(cm), "the third revision's chunks go to parts that hold none in their grace")
		}
		// A reader of the first index still reads it whole.
		cms, err := tableConfigMaps(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		parts := []spec.TablePart{{Name: "tools", Data: index1.Data, BinaryData: index1.BinaryData}}
		for _, cm := range cms {
			if cm.Name != "tools" {
				parts = append(parts, spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData})
			}
		}
		old, err := spec.DecodeTableParts(parts...)
		Expect(err).NotTo(HaveOccurred())
		Expect(old.Revision).To(Equal(spec.TableRevision(sorted(t1))))

		for range 3 {
			now = now.Add(time.Minute)
			write(t3)
		}
		Expect(settled(ctx, ns)).To(BeTrue())
		cms, err = tableConfigMaps(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(cms).To(HaveLen(len(partsOf())+1), "the emptied parts are deleted")
		Expect(cms).NotTo(ContainElement(HaveField("ObjectMeta.Name", parts1[0])), "a hole in the numbering")
		got, err := readAsAgent(ctx, ns, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Tools).To(HaveLen(len(t3)))
	})

	DescribeTable("never waits for a grace while parts have room, in a burst of writes of a growing table",
		func(ctx context.Context, name func(round, i int) string) {
			ns := newNamespace(ctx)
			ts := types.NamespacedName{Namespace: ns, Name: "big"}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			writes := &writeLog{}
			store := &configMapTable{
				client: countingClient(writes), reader: k8sClient, namespace: ns, name: "tools",
				grace: time.Minute, now: func() time.Time { return now },
			}
			tools := noisyTools(ts, "t", 3000)
			maxParts := 0
			for round := range 15 {
				// As during convergence: a write every 3 s, each with tools
				// of more ToolSets, well within the grace of the last ones.
				now = now.Add(3 * time.Second)
				more := noisyTools(ts, fmt.Sprintf("r%d", round), 100)
				for i := range more {
					more[i].Name = name(round, i)
				}
				tools = append(tools, more...)
				before := writes.count()
				_, err := store.write(ctx, &spec.Table{Tools: tools})
				Expect(err).NotTo(HaveOccurred())
				Expect(storedRevision(ctx, ns)).To(Equal(spec.TableRevision(sorted(tools))), "write %d did not wait for room", round)
				got, err := readAsAgent(ctx, ns, GinkgoT().TempDir())
				Expect(err).NotTo(HaveOccurred())
				Expect(got.Tools).To(HaveLen(len(tools)))
				cms, err := tableConfigMaps(ctx, ns)
				Expect(err).NotTo(HaveOccurred())
				for _, cm := range cms {
					Expect(spec.TablePart{Data: cm.Data, BinaryData: cm.BinaryData}.StoredSize()).To(BeNumerically("<=", spec.MaxTablePartBytes), cm.Name)
				}
				maxParts = max(maxParts, len(cms))
				cost := costOf(writes.all()[before:])
				GinkgoWriter.Printf("write %d: %d tools, %d part ConfigMaps written, %d bytes; %d ConfigMaps\n", round, len(tools), len(cost.parts), cost.bytes, len(cms))
			}
			Expect(maxParts).To(BeNumerically("<=", spec.MaxTableParts))
		},
		Entry("tools appended in name order", func(round, i int) string { return fmt.Sprintf("u%02d_%03d", round, i) }),
		Entry("tools scattered over the names", func(round, i int) string { return fmt.Sprintf("t_%04d_%02d", i*30, round) }),
	)

	It("leaves a table that agents read whole, old or new, when a change to a middle segment stops after any write", func(ctx context.Context) {
		ts := types.NamespacedName{Namespace: "tenant", Name: "big"}
		old := noisyTools(ts, "t", 6000)
		next := slices.Clone(old)
		next[len(next)/2].Description += " Also archived ones."
		next = append(next, entry(ts, "t_03000_b", "t_03000_b"))

		// The old table, settled.
		src := newNamespace(ctx)
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		first := &configMapTable{client: k8sClient, reader: k8sClient, namespace: src, name: "tools", grace: time.Minute, now: func() time.Time { return now }}
		_, err := first.write(ctx, &spec.Table{Tools: old})
		Expect(err).NotTo(HaveOccurred())
		oldCMs, err := tableConfigMaps(ctx, src)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(oldCMs)).To(BeNumerically(">=", 4), "the table spans at least four ConfigMaps")
		oldRev, newRev := spec.TableRevision(sorted(old)), spec.TableRevision(sorted(next))

		dir := GinkgoT().TempDir()
		volumes := &agentVolumes{}
		total := -1
		for k := 1; total < 0; k++ {
			By(fmt.Sprintf("stopping the writer after write %d", k))
			ns := newNamespace(ctx)
			copyConfigMaps(ctx, ns, oldCMs)
			reads := &agentReads{volumes: volumes, revisions: map[string]int{}}
			writes := &writeLog{}
			cl, stopped := stoppingClient(writes, k, reads.after(ctx, ns, dir))
			now := now
			s1 := &configMapTable{client: cl, reader: k8sClient, namespace: ns, name: "tools", grace: time.Minute, now: func() time.Time { return now }}
			done := false
			for range 4 {
				wait, err := s1.write(ctx, &spec.Table{Tools: next})
				select {
				case <-stopped:
				default:
					Expect(err).NotTo(HaveOccurred())
					if wait == 0 {
						done = true
					}
					now = now.Add(wait)
					continue
				}
				break
			}
			if done {
				total = writes.count()
				Expect(settled(ctx, ns)).To(BeTrue())
			}

			// A new store finishes what the stopped one left.
			stored, _, err := storedTable(ctx, ns)
			Expect(err).NotTo(HaveOccurred(), "the table reads back after write %d", k)
			Expect(stored.Revision).To(BeElementOf(oldRev, newRev))
			s2 := &configMapTable{client: k8sClient, reader: k8sClient, namespace: ns, name: "tools", grace: time.Minute, now: func() time.Time { return now }}
			for range 4 {
				wait, err := s2.write(ctx, &spec.Table{Tools: next})
				Expect(err).NotTo(HaveOccurred())
				if wait == 0 {
					break
				}
				now = now.Add(wait)
			}
			Expect(storedRevision(ctx, ns)).To(Equal(newRev))
			Expect(settled(ctx, ns)).To(BeTrue())

			reads.mu.Lock()
			Expect(reads.errs).To(BeEmpty(), "an agent's read failed after write %d", k)
			for rev := range reads.revisions {
				Expect(rev).To(BeElementOf(oldRev, newRev))
			}
			reads.mu.Unlock()
		}
		Expect(total).To(BeNumerically(">=", 3), "staging, the index and the clean-up are each a write")
		Expect(total).To(BeNumerically("<=", 6), "a change to two segments writes at most two parts, the index, and cleans two parts")
		GinkgoWriter.Printf("Stopped the writer after each of its %d writes\n", total)
	})
})

func mustGetBase(ctx context.Context, ns string) *corev1.ConfigMap {
	GinkgoHelper()
	cms, err := tableConfigMaps(ctx, ns)
	Expect(err).NotTo(HaveOccurred())
	for i := range cms {
		if cms[i].Name == "tools" {
			return &cms[i]
		}
	}
	Fail("no base ConfigMap")
	return nil
}

func sorted(tools []spec.TableTool) []spec.TableTool {
	tools = slices.Clone(tools)
	spec.SortTableTools(tools)
	return tools
}
