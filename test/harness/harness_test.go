package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestReadProcStatsOfSelf(t *testing.T) {
	s, err := harness.ReadProcStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.PeakRSS < s.RSS {
		t.Errorf("RSS %d, peak %d: want 0 < RSS <= peak", s.RSS, s.PeakRSS)
	}
}

func TestControlPlaneCountsWritesAndTableRoundTrips(t *testing.T) {
	ctx := context.Background()
	cp, err := harness.StartControlPlane(filepath.Join("..", "..", "config", "crd", "bases"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := cp.CreateNamespace(ctx, "tables"); err != nil {
		t.Fatal(err)
	}
	before, err := cp.Writes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bytesBefore, err := cp.WriteBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}

	table := &spec.Table{Tools: []spec.TableTool{{Name: "a", SourceName: "a", InputSchema: []byte(`{"type":"object"}`), ToolSet: spec.ObjectReference{Namespace: "n", Name: "s"}}}}
	parts, err := spec.EncodeTable(table, "tools")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tables", Name: p.Name}, Data: p.Data, BinaryData: p.BinaryData}
		if err := cp.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// A ConfigMap whose name only starts like the table's is not a part.
	if err := cp.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tables", Name: "tools-x"}}); err != nil {
		t.Fatal(err)
	}

	after, err := cp.Writes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := after["configmaps"]-before["configmaps"], float64(len(parts)+1); got != want {
		t.Errorf("configmap writes counted %v, want %v", got, want)
	}
	bytesAfter, err := cp.WriteBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The request bodies are whole ConfigMaps: their payload and metadata.
	payload := 0
	for _, p := range parts {
		payload += p.StoredSize()
	}
	if got := bytesAfter["configmaps"] - bytesBefore["configmaps"]; got < float64(payload) || got > float64(payload+4096) {
		t.Errorf("configmap write bytes counted %v, want the %d bytes of payload plus metadata", got, payload)
	}
	got, st, err := harness.ReadTable(ctx, cp.Client, "tables", "tools")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != 1 || got.Tools[0].Name != "a" {
		t.Errorf("read back %+v", got.Tools)
	}
	if st.Parts != len(parts) || st.MaxPart != parts[0].StoredSize() {
		t.Errorf("stats %+v for %d parts of %d bytes", st, len(parts), parts[0].StoredSize())
	}
}
