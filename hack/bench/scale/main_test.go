package main

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	for flag, want := range map[string]string{"chart": "241591910", "": "", "0": "", "300MiB": "300MiB"} {
		got, err := resolveGoMemLimit(flag)
		if err != nil || got != want {
			t.Errorf("resolveGoMemLimit(%q) = %q, %v; want %q", flag, got, err, want)
		}
	}
}

func TestAtRestAllowsTheLedgerBesideTheTable(t *testing.T) {
	cm := func(name string, data map[string]string, bin map[string][]byte) corev1.ConfigMap {
		return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tableNamespace, Name: name}, Data: data, BinaryData: bin}
	}
	table := map[string]string{spec.TableKey: "{}"}
	ledger := map[string][]byte{spec.TableLedgerKey: {1}}
	for _, tc := range []struct {
		name string
		cms  []corev1.ConfigMap
		want bool
	}{
		{"the table alone", []corev1.ConfigMap{cm(tableName, table, nil)}, true},
		{"the table and its ledger", []corev1.ConfigMap{cm(tableName, table, ledger)}, true},
		{"a ledger in another ConfigMap", []corev1.ConfigMap{cm(tableName, table, nil), cm(tableName+"-x", nil, ledger)}, false},
		{"a chunk the table does not name", []corev1.ConfigMap{cm(tableName, map[string]string{spec.TableKey: "{}", "tools.0001.json": "{}"}, ledger)}, false},
	} {
		if got := atRest(tc.cms); got != tc.want {
			t.Errorf("%s: atRest = %v, want %v", tc.name, got, tc.want)
		}
	}
}
