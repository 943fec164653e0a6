package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// splitTable returns 600 tools of a KiB of noise each: a table of a base
// (the index and a chunk), at least one part, and one ledger chunk.
func splitTable() []spec.TableTool {
	ts := types.NamespacedName{Namespace: "tenant", Name: "noisy"}
	rng := rand.New(rand.NewPCG(3, 4))
	tools := make([]spec.TableTool, 600)
	for i := range tools {
		name := fmt.Sprintf("noise_%04d", i)
		tools[i] = entry(ts, name, name)
		tools[i].Description = incompressible(rng, 1<<10)
	}
	return tools
}

// storeConfigMaps returns the ConfigMaps in the store's namespace, by name,
// and the table their parts decode to.
func storeConfigMaps(ctx context.Context, t *testing.T, c client.Client) (map[string]corev1.ConfigMap, *spec.Table) {
	t.Helper()
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace("toolplane-system")); err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]corev1.ConfigMap, len(list.Items))
	var parts []spec.TablePart
	for _, cm := range list.Items {
		byName[cm.Name] = cm
		if _, _, ok := spec.ParseTableLedgerName("tools", cm.Name); ok || !strings.HasPrefix(cm.Name, "tools") {
			continue
		}
		parts = append(parts, spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData})
	}
	table, err := spec.DecodeTableParts(parts...)
	if err != nil {
		t.Fatalf("decoding the stored table: %v", err)
	}
	return byName, table
}

// TestStoreAdoptsItsConfigMapsWithoutTheLabel: a part of the table and a
// chunk of its ledger whose app.kubernetes.io/managed-by label was removed,
// or set by another tool, are still the table's. Before, the store read
// them as a stranger's, and every write after tried to create them again
// and failed with AlreadyExists: the table stopped for every tenant.
func TestStoreAdoptsItsConfigMapsWithoutTheLabel(t *testing.T) {
	for _, relabel := range []string{"", "Helm"} {
		t.Run(fmt.Sprintf("label %q", relabel), func(t *testing.T) {
			ctx := quiet()
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
			s, _, _ := redteamStore(c)
			tools := splitTable()
			records := make([]spec.TableRecord, len(tools))
			if err := redteamWrite(ctx, s, tools, records); err != nil {
				t.Fatal(err)
			}
			stored, _ := storeConfigMaps(ctx, t, c)
			var victims []string
			for name := range stored {
				if name != "tools" {
					victims = append(victims, name)
				}
			}
			if len(victims) < 2 {
				t.Fatalf("want a part and a ledger chunk besides the base, have %v", victims)
			}
			for _, name := range victims {
				cm := stored[name]
				if relabel == "" {
					delete(cm.Labels, TableManagedByLabel)
				} else {
					cm.Labels[TableManagedByLabel] = relabel
				}
				if err := c.Update(ctx, &cm); err != nil {
					t.Fatal(err)
				}
			}

			// The watch kicks a write for the change; so does a change of
			// the table.
			for round, tools := range [][]spec.TableTool{tools, tools[1:]} {
				if err := redteamWrite(ctx, s, tools, records[:len(tools)]); err != nil {
					t.Fatalf("write %d after the label was changed: %v", round, err)
				}
				stored, table := storeConfigMaps(ctx, t, c)
				if want := spec.TableRevision(sorted(tools)); table.Revision != want {
					t.Fatalf("write %d: the stored table is revision %s, want %s", round, table.Revision, want)
				}
				for _, name := range victims {
					if cm, ok := stored[name]; ok && cm.Labels[TableManagedByLabel] != tableManagedBy {
						t.Errorf("write %d: %s is labelled %q, want %q again", round, name, cm.Labels[TableManagedByLabel], tableManagedBy)
					}
				}
			}
		})
	}
}

// TestStoreLeavesAStrangersConfigMapUnderAReservedName: a ConfigMap that
// holds keys the table does not write is never the table's, whatever its
// name: the write that needs its name fails, naming it and what to do, and
// leaves it as it is.
func TestStoreLeavesAStrangersConfigMapUnderAReservedName(t *testing.T) {
	ctx := quiet()
	stranger := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "toolplane-system", Name: "tools-1", Labels: map[string]string{TableManagedByLabel: "Helm"}},
		Data:       map[string]string{"app.conf": "keep me", spec.TablePartKey(1): "looks like ours"},
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(stranger.DeepCopy()).Build()
	s, _, _ := redteamStore(c)
	tools := splitTable()
	err := redteamWrite(ctx, s, tools, make([]spec.TableRecord, len(tools)))
	if err == nil {
		t.Fatal("the table was written over a stranger's ConfigMap")
	}
	for _, want := range []string{"tools-1", "reserved", TableManagedByLabel} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(stranger), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[TableManagedByLabel] != "Helm" || len(got.Data) != 2 || got.Data["app.conf"] != "keep me" || len(got.BinaryData) != 0 {
		t.Errorf("the stranger's ConfigMap was changed: labels %v, data %v, binaryData keys %d", got.Labels, got.Data, len(got.BinaryData))
	}
}
