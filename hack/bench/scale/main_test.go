package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestResolveGoMemLimitFromTheChartsDefaults(t *testing.T) {
	// The chart's defaults: 90% of a 256Mi limit, as
	// charts/toolplane/templates/_helpers.tpl computes it.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(wd, "..", "..", ".."))
	for flag, want := range map[string]string{"chart": "174483046", "": "", "0": "", "300MiB": "300MiB"} {
		got, err := resolveGoMemLimit(flag)
		if err != nil || got != want {
			t.Errorf("resolveGoMemLimit(%q) = %q, %v; want %q", flag, got, err, want)
		}
	}
}

func TestAtRestKnowsTheLedger(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tools := make([]spec.TableTool, 3000)
	records := make([]spec.TableRecord, len(tools))
	for i := range tools {
		// Descriptions that do not compress: the table is split.
		desc := make([]byte, 200)
		for j := range desc {
			desc[j] = byte('a' + rng.IntN(26))
		}
		tools[i] = spec.TableTool{Name: fmt.Sprintf("tool_%05d", i), Description: string(desc), ToolSet: spec.ObjectReference{Namespace: "ns", Name: fmt.Sprintf("set-%d", i/10)}}
		records[i] = spec.TableRecord{Since: time.Unix(int64(i), 0), Why: "Claimed"}
	}
	parts, err := spec.EncodeTable(&spec.Table{Tools: tools}, tableName)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parts[0].Data[spec.TableIndexKey]; !ok || len(parts) < 2 {
		t.Fatalf("the table is not split: %d parts", len(parts))
	}
	refs := make([]*spec.TableTool, len(tools))
	for i := range tools {
		refs[i] = &tools[i]
	}
	chunks := func(n int) []spec.TablePart {
		out, err := new(spec.TableLedgerEncoder).Encode(refs, records, tableName, n)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cms := func(parts ...[]spec.TablePart) []corev1.ConfigMap {
		var out []corev1.ConfigMap
		for _, ps := range parts {
			for _, p := range ps {
				out = append(out, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: tableNamespace}, Data: p.Data, BinaryData: p.BinaryData})
			}
		}
		return out
	}
	if !atRest(cms(parts, chunks(4))) {
		t.Error("a table and its ledger's chunks are not at rest")
	}
	legacy := slices.Clone(parts)
	legacy[0].BinaryData = map[string][]byte{spec.TableLedgerKey: []byte("ledger")}
	for k, v := range parts[0].BinaryData {
		legacy[0].BinaryData[k] = v
	}
	if !atRest(cms(legacy)) {
		t.Error("a table with its ledger beside the index, as written before chunks, is not at rest")
	}
	if atRest(cms(parts, chunks(4), chunks(8)[:1])) {
		t.Error("chunks of two layouts are at rest")
	}
	stale := slices.Clone(parts)
	stale[1].BinaryData = map[string][]byte{spec.TableChunkKey("00"): []byte("old")}
	for k, v := range parts[1].BinaryData {
		stale[1].BinaryData[k] = v
	}
	if atRest(cms(stale, chunks(4))) {
		t.Error("a chunk the index does not name is at rest")
	}
}

func TestCompareBaselineTellsAnotherStatus(t *testing.T) {
	want := readyStatus(7, 10)
	manager := *want.DeepCopy()
	manager.Revision = "sha256:" + strings.Repeat("ab", 32)
	for i := range manager.Conditions {
		manager.Conditions[i].LastTransitionTime = metav1.NewTime(time.Unix(1e9, 0))
	}
	if err := compareBaseline(manager, want); err != nil {
		t.Fatalf("the same status but for the revision and the transition times: %v", err)
	}
	for name, change := range map[string]func(*v1alpha1.ToolSetStatus){
		"a condition more": func(st *v1alpha1.ToolSetStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: "Extra", Status: metav1.ConditionFalse, Reason: "Extra"})
		},
		"another message":   func(st *v1alpha1.ToolSetStatus) { st.Conditions[2].Message += "." },
		"a tool less":       func(st *v1alpha1.ToolSetStatus) { st.Tools = st.Tools[1:] },
		"a tool's owner":    func(st *v1alpha1.ToolSetStatus) { st.Tools[0].Owner = "elsewhere" },
		"a shorter digest":  func(st *v1alpha1.ToolSetStatus) { st.Revision = "sha256:ab" },
		"two Pods selected": func(st *v1alpha1.ToolSetStatus) { st.Pods.Selected = 2 },
	} {
		other := *manager.DeepCopy()
		change(&other)
		if err := compareBaseline(other, want); err == nil {
			t.Errorf("%s: the statuses compare equal", name)
		}
	}
	if got := manager.Conditions[0].LastTransitionTime; got.IsZero() {
		t.Error("compareBaseline changed the status it was given")
	}
}
