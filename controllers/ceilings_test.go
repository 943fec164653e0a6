package controllers

import (
	"strings"
	"testing"
)

func TestCeilingsValidate(t *testing.T) {
	if err := (Ceilings{}).Validate(); err != nil {
		t.Fatalf("the zero ceilings: %v", err)
	}
	if err := (Ceilings{MaxTableBytes: DefaultMaxTableBytes}).Validate(); err != nil {
		t.Fatalf("the default --max-table-bytes: %v", err)
	}
	// What the encoder cannot lay out whatever the tools is refused, as
	// main's 32 MiB default was.
	if err := (Ceilings{MaxTableBytes: 32 << 20}).Validate(); err == nil || !strings.Contains(err.Error(), "--max-table-bytes") {
		t.Fatalf("--max-table-bytes=32MiB: err = %v, want a refusal naming the flag", err)
	}
	if err := (Ceilings{MaxDescriptionBytes: -1}).Validate(); err == nil {
		t.Fatal("a negative description bound was accepted")
	}
}
