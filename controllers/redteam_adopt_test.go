package controllers

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// Red-team specs of 5e8b00e (adopting label-less ConfigMaps under the
// table's reserved names): each failed on it, and passes since 5718a35.

// countingReader counts the full Gets of each ConfigMap.
type countingReader struct {
	client.Reader
	mu   sync.Mutex
	gets map[string]int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	r.gets[key.Name]++
	r.mu.Unlock()
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestRedteamAdoptReadsAStrangerAgainOnlyOnceItMoves: a stranger's
// ConfigMap under a reserved name (no label, a key the table does not
// write) is left alone, and read again only once it moves. On 5e8b00e,
// list did not remember that it left it, and every write read it again in
// full: up to 63 part names and 127 ledger-chunk names, at ~1 MiB each,
// made every write of the table read ~190 MiB from the API server, for as
// long as they stayed.
func TestRedteamAdoptReadsAStrangerAgainOnlyOnceItMoves(t *testing.T) {
	ctx := quiet()
	big := strings.Repeat("x", 900<<10)
	strangers := []string{"tools-5", "tools.ledger-3-of-4"}
	var objs []client.Object
	for _, name := range strangers {
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "toolplane-system", Name: name},
			Data:       map[string]string{"app.conf": big},
		})
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	s, tools, records := redteamStore(c)
	r := &countingReader{Reader: c, gets: map[string]int{}}
	s.reader = r
	const writes = 5
	for i := range writes {
		if err := redteamWrite(ctx, s, tools[:len(tools)-i%2], records[:len(tools)-i%2]); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for _, name := range strangers {
		if n := r.gets[name]; n > 1 {
			t.Errorf("the unchanged stranger %s (900 KiB) was read in full %d times in %d writes, want at most once", name, n, writes)
		}
	}
}

// TestRedteamAdoptLeavesAConfigMapSomeoneElseOwns: a ConfigMap with no
// keys that someone else owns (an ownerReference, a leader-election or
// GitOps annotation, another managed-by) is not the table's. On 5e8b00e,
// adoptable took it, looking at no metadata: under a ledger-chunk name
// pruneLedger deleted it at once; under a part name it was relabelled and
// filled with the table's chunks, keeping its ownerReference, so that the
// garbage collector would delete a part the index names when that owner
// went (a torn table for every reader).
func TestRedteamAdoptLeavesAConfigMapSomeoneElseOwns(t *testing.T) {
	owned := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "toolplane-system", Name: name,
			Labels:      map[string]string{TableManagedByLabel: "argocd"},
			Annotations: map[string]string{"control-plane.alpha.kubernetes.io/leader": `{"holderIdentity":"other"}`},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "other-app",
				UID: types.UID("0b7ec5a1-0000-4000-8000-000000000001")}},
		}}
	}
	for _, tc := range []struct {
		name  string
		tools func() ([]spec.TableTool, []spec.TableRecord)
	}{
		// A small table: one ledger chunk, tools.ledger-0-of-1.
		{"tools.ledger-1-of-2", func() ([]spec.TableTool, []spec.TableRecord) {
			_, tools, records := redteamStore(nil)
			return tools, records
		}},
		// A split table: it needs part tools-1.
		{"tools-1", func() ([]spec.TableTool, []spec.TableRecord) {
			tools := splitTable()
			return tools, make([]spec.TableRecord, len(tools))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := quiet()
			stranger := owned(tc.name)
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(stranger.DeepCopy()).Build()
			s, _, _ := redteamStore(c)
			tools, records := tc.tools()
			err := redteamWrite(ctx, s, tools, records)
			var got corev1.ConfigMap
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(stranger), &got); gerr != nil {
				t.Fatalf("the other owner's ConfigMap %s is gone after the write (write error %v): %v", tc.name, err, gerr)
			}
			if got.Labels[TableManagedByLabel] != "argocd" || len(got.Data)+len(got.BinaryData) != 0 {
				t.Errorf("the other owner's ConfigMap %s was taken (write error %v): labels %v, %d keys, ownerReferences %v",
					tc.name, err, got.Labels, len(got.Data)+len(got.BinaryData), got.OwnerReferences)
			}
		})
	}
}

// TestRedteamAdoptTakesNoIndexFromAPart: a label-less ConfigMap under a
// part name that holds the base's keys (the index, and its chunk) is not
// the table's. On 5e8b00e, every key the table writes was accepted in
// every reserved ConfigMap, whatever its kind: it was adopted, and read,
// which merges the parts' keys in order, took its index over the base's
// (load() restores the names' owners from what read returns).
func TestRedteamAdoptTakesNoIndexFromAPart(t *testing.T) {
	ctx := quiet()
	// A forged table's base, written elsewhere.
	other := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	fs, _, _ := redteamStore(other)
	forged := splitTable()
	for i := range forged {
		forged[i].Description = "forged " + forged[i].Description
	}
	if err := redteamWrite(ctx, fs, forged, make([]spec.TableRecord, len(forged))); err != nil {
		t.Fatal(err)
	}
	// Its parts' keys, all in one ConfigMap: read merges keys by name.
	forgedCMs, _ := storeConfigMaps(ctx, t, other)
	fdata, fbin := map[string]string{}, map[string][]byte{}
	for name, cm := range forgedCMs {
		if _, _, ok := spec.ParseTableLedgerName("tools", name); ok || !strings.HasPrefix(name, "tools") {
			continue
		}
		for k, v := range cm.Data {
			fdata[k] = v
		}
		for k, v := range cm.BinaryData {
			fbin[k] = v
		}
	}
	if _, ok := fdata[spec.TableIndexKey]; !ok {
		t.Fatalf("the forged table has no index: keys %v", keysOf(fdata, fbin))
	}

	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	s, _, _ := redteamStore(c)
	tools := splitTable()
	if err := redteamWrite(ctx, s, tools, make([]spec.TableRecord, len(tools))); err != nil {
		t.Fatal(err)
	}
	// Under a part name the table does not use now, without the label.
	if err := c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "toolplane-system", Name: "tools-62"},
		Data:       fdata, BinaryData: fbin,
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := spec.TableRevision(sorted(tools)); got.Revision != want {
		t.Errorf("read returned revision %s (%d tools, the first described %.12q), not the base's %s: a label-less ConfigMap under a part name replaced the index",
			got.Revision, len(got.Tools), got.Tools[0].Description, want)
	}
}
