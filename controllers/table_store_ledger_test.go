package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// ledgerKeys are the keys that hold ledger records: beside the table, as
// written before the ledger had chunks, and in a chunk.
var ledgerKeys = []string{spec.TableLedgerKey, spec.TableLedgerChunkKey}

// ledgerCost is what writes spent on the ledger: the bytes, as stored, of
// every ledger key they carry, and the ledger's ConfigMaps they wrote.
func ledgerCost(writes []tableWrite) (bytes int, chunks []string) {
	for _, w := range writes {
		if w.verb == "delete" {
			continue
		}
		for _, k := range ledgerKeys {
			if v, ok := w.cm.BinaryData[k]; ok {
				bytes += spec.TablePart{BinaryData: map[string][]byte{k: v}}.StoredSize()
			}
		}
		if _, _, ok := spec.ParseTableLedgerName("tools", w.cm.Name); ok {
			chunks = append(chunks, w.cm.Name)
		}
	}
	return bytes, chunks
}

// ledgerConfigMaps returns the ledger's chunks of the table "tools" in ns.
func ledgerConfigMaps(ctx context.Context, ns string) []corev1.ConfigMap {
	GinkgoHelper()
	var list corev1.ConfigMapList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if _, _, ok := spec.ParseTableLedgerName("tools", cm.Name); ok {
			out = append(out, cm)
		}
	}
	return out
}

// ownedTable returns the tools of owners ToolSets of per tools each in
// namespace ns, with UIDs, and a record of each: the ToolSet's claim, at
// a second of its own.
func ownedTable(ns string, owners, per int) ([]spec.TableTool, []spec.TableRecord) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var tools []spec.TableTool
	var records []spec.TableRecord
	for i := range owners {
		ts := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("set-%03d", i)}
		for j := range per {
			name := fmt.Sprintf("s%03d_tool_%02d", i, j)
			e := entry(ts, name, name)
			e.ToolSetUID = fmt.Sprintf("uid-%03d", i)
			tools = append(tools, e)
			records = append(records, spec.TableRecord{Since: at.Add(time.Duration(i) * time.Second), Why: "Claimed"})
		}
	}
	return tools, records
}

var _ = Describe("The tool table store's ledger", func() {
	var (
		ns     string
		now    time.Time
		writes *writeLog
		store  *configMapTable
	)
	BeforeEach(func(ctx context.Context) {
		ns = newNamespace(ctx)
		now = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
		writes = &writeLog{}
		store = &configMapTable{
			client: countingClient(writes), reader: k8sClient, namespace: ns, name: "tools",
			grace: time.Minute, now: func() time.Time { return now },
		}
	})
	write := func(ctx context.Context, tools []spec.TableTool, records []spec.TableRecord) []tableWrite {
		GinkgoHelper()
		before := writes.count()
		_, err := store.write(ctx, &spec.Table{Tools: tools, Records: records})
		Expect(err).NotTo(HaveOccurred())
		return writes.all()[before:]
	}

	// Before the ledger had chunks, every write of the table carried the
	// whole ledger in the base: a change of content alone wrote it all.
	It("writes no byte of the ledger for a change of content, and for a change of owner the chunks of the owners alone", func(ctx context.Context) {
		// 3,000 names: the ledger in four chunks.
		tools, records := ownedTable(ns, 300, 10)
		write(ctx, tools, records)
		chunks := ledgerConfigMaps(ctx, ns)
		Expect(chunks).To(HaveLen(spec.TableLedgerChunks(len(tools), 0)))
		Expect(len(chunks)).To(BeNumerically(">", 1))
		Expect(mustGetBase(ctx, ns).BinaryData).NotTo(HaveKey(spec.TableLedgerKey), "the base holds the table alone")

		By("changing a tool's description")
		now = now.Add(2 * time.Minute)
		tools[1234].Description = "Changed."
		w := write(ctx, tools, records)
		Expect(w).NotTo(BeEmpty(), "the table is written")
		bytes, written := ledgerCost(w)
		Expect(bytes).To(BeZero(), "ledger bytes written for a change of content")
		Expect(written).To(BeEmpty())

		By("a new ToolSet claiming ten names")
		now = now.Add(2 * time.Minute)
		newcomer := spec.ObjectReference{Namespace: ns, Name: "newcomer"}
		for j := range 10 {
			e := entry(types.NamespacedName{Namespace: ns, Name: newcomer.Name}, fmt.Sprintf("new_%02d", j), "x")
			e.ToolSetUID = "uid-new"
			tools = append(tools, e)
			records = append(records, spec.TableRecord{Since: now, Why: "Claimed"})
		}
		bytes, written = ledgerCost(write(ctx, tools, records))
		newChunk := spec.TableLedgerName("tools", spec.TableLedgerChunkOf(newcomer, len(chunks)), len(chunks))
		Expect(written).To(Equal([]string{newChunk}), "one chunk: the newcomer's")
		Expect(bytes).To(BeNumerically("<", spec.MaxTablePartBytes/8))

		By("handing a name from one ToolSet to another")
		now = now.Add(2 * time.Minute)
		giver := tools[42].ToolSet
		tools[42].ToolSet, tools[42].ToolSetUID = newcomer, "uid-new"
		records[42] = spec.TableRecord{Since: now, Why: "HandedOver"}
		_, written = ledgerCost(write(ctx, tools, records))
		want := []string{newChunk, spec.TableLedgerName("tools", spec.TableLedgerChunkOf(giver, len(chunks)), len(chunks))}
		slices.Sort(want)
		// The chunks are written at once, in no order.
		slices.Sort(written)
		Expect(written).To(Equal(slices.Compact(want)), "the chunks of the giver and the taker")

		By("writing the same table again")
		Expect(write(ctx, tools, records)).To(BeEmpty(), "nothing changed, nothing is written")

		By("reading it back, as a new store after a restart")
		again := &configMapTable{client: k8sClient, reader: k8sClient, namespace: ns, name: "tools", grace: time.Minute}
		t, err := again.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		byName := map[string]spec.TableRecord{}
		for i := range tools {
			byName[tools[i].Name] = spec.TableRecord{Since: records[i].Since.Truncate(time.Second), Why: records[i].Why}
		}
		Expect(t.Records).To(HaveLen(len(t.Tools)))
		got := map[string]spec.TableRecord{}
		for i := range t.Tools {
			got[t.Tools[i].Name] = t.Records[i]
		}
		Expect(maps.EqualFunc(got, byName, func(a, b spec.TableRecord) bool { return a.Why == b.Why && a.Since.Equal(b.Since) })).To(BeTrue(),
			"every record read back as written")
	})

	It("writes a deleted chunk again, and reads the table of a writer stopped between the chunks and the table", func(ctx context.Context) {
		tools, records := ownedTable(ns, 300, 10)
		write(ctx, tools, records)
		chunks := ledgerConfigMaps(ctx, ns)
		Expect(len(chunks)).To(BeNumerically(">", 1))

		victim := chunks[1]
		Expect(k8sClient.Delete(ctx, &victim)).To(Succeed())
		w := write(ctx, tools, records)
		Expect(w).To(HaveLen(1), "the one chunk missing is written, and nothing else")
		Expect(w[0].cm.Name).To(Equal(victim.Name))
		Expect(w[0].cm.BinaryData).To(Equal(victim.BinaryData))

		By("stopping the writer after the chunks of a handover, before the table")
		taker := spec.ObjectReference{Namespace: ns, Name: "set-299"}
		moved := slices.Clone(tools)
		movedRecords := slices.Clone(records)
		moved[7].ToolSet, moved[7].ToolSetUID = taker, "uid-299"
		movedRecords[7] = spec.TableRecord{Since: now.Add(time.Hour), Why: "HandedOver"}
		n := len(chunks)
		giverChunk := spec.TableLedgerChunkOf(tools[7].ToolSet, n)
		takerChunk := spec.TableLedgerChunkOf(taker, n)
		ledgerWrites := len(slices.Compact([]int{min(giverChunk, takerChunk), max(giverChunk, takerChunk)}))
		stopping, _ := stoppingClient(&writeLog{}, ledgerWrites, func(client.Object) {})
		store.client = stopping
		_, err := store.write(ctx, &spec.Table{Tools: moved, Records: movedRecords})
		Expect(err).To(MatchError(errWriterStopped))

		again := &configMapTable{client: k8sClient, reader: k8sClient, namespace: ns, name: "tools", grace: time.Minute}
		t, err := again.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Tools[7].ToolSet).NotTo(Equal(taker), "the table was not written")
		Expect(t.Records[7].Why).To(BeEmpty(), "the record of the taker is not the giver's")
		for i := range t.Tools {
			if i != 7 {
				Expect(t.Records[i].Why).To(Equal("Claimed"), "the record of %s", t.Tools[i].Name)
			}
		}
	})

	It("moves the ledger to more chunks as the table grows, deleting the old ones, and keeps them as it shrinks less than eightfold", func(ctx context.Context) {
		tools, records := ownedTable(ns, 100, 10)
		write(ctx, tools, records)
		Expect(ledgerConfigMaps(ctx, ns)).To(HaveLen(1))

		tools, records = ownedTable(ns, 300, 10)
		write(ctx, tools, records)
		grown := ledgerConfigMaps(ctx, ns)
		Expect(grown).To(HaveLen(4))
		for _, cm := range grown {
			_, n, _ := spec.ParseTableLedgerName("tools", cm.Name)
			Expect(n).To(Equal(4), cm.Name)
		}

		tools, records = ownedTable(ns, 20, 10)
		write(ctx, tools, records)
		for _, cm := range ledgerConfigMaps(ctx, ns) {
			_, n, _ := spec.ParseTableLedgerName("tools", cm.Name)
			Expect(n).To(Equal(4), "%s: a table that shrinks and grows again does not move its ledger each time", cm.Name)
		}
		t, err := store.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Records).To(HaveEach(HaveField("Why", "Claimed")))

		By("writing the table with no record")
		write(ctx, tools, nil)
		Expect(ledgerConfigMaps(ctx, ns)).To(BeEmpty())
	})

	It("reads the ledger a table kept beside it before the ledger had chunks, and drops it with the next write", func(ctx context.Context) {
		tools, records := ownedTable(ns, 30, 10)
		// What the store wrote then: the ledger in the base.
		write(ctx, tools, nil)
		base := mustGetBase(ctx, ns)
		ptrs := make([]*spec.TableTool, len(tools))
		for i := range tools {
			ptrs[i] = &tools[i]
		}
		t, err := store.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		if base.BinaryData == nil {
			base.BinaryData = map[string][]byte{}
		}
		base.BinaryData[spec.TableLedgerKey] = spec.EncodeTableLedger(ptrs, records, t.Revision, spec.MaxTablePartBytes/2)
		Expect(k8sClient.Update(ctx, base)).To(Succeed())

		t, err = store.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Records).To(HaveLen(len(tools)))
		Expect(t.Records).To(HaveEach(HaveField("Why", "Claimed")))

		write(ctx, tools, t.Records)
		Expect(mustGetBase(ctx, ns).BinaryData).NotTo(HaveKey(spec.TableLedgerKey))
		Expect(ledgerConfigMaps(ctx, ns)).To(HaveLen(1))
		t, err = store.read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Records).To(HaveEach(HaveField("Why", "Claimed")))
	})
})
