package main

import (
	"os"
	"path/filepath"
	"testing"
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
