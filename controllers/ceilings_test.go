package controllers

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestCeilingsValidate(t *testing.T) {
	if err := (Ceilings{}).Validate(); err != nil {
		t.Fatalf("the zero ceilings: %v", err)
	}
	if err := (Ceilings{MaxTableBytes: DefaultMaxTableBytes}).Validate(); err != nil {
		t.Fatalf("the default --max-table-bytes: %v", err)
	}
	// Up to what readers accept is honoured: what the encoder cannot lay
	// out of it is denied, not refused.
	if err := (Ceilings{MaxTableBytes: spec.MaxTableBytes}).Validate(); err != nil {
		t.Fatalf("--max-table-bytes=64MiB: %v", err)
	}
	// Past what readers accept is refused.
	if err := (Ceilings{MaxTableBytes: spec.MaxTableBytes + 1}).Validate(); err == nil || !strings.Contains(err.Error(), "--max-table-bytes") {
		t.Fatalf("--max-table-bytes=64MiB+1: err = %v, want a refusal naming the flag", err)
	}
	if err := (Ceilings{MaxTableBytes: -1}).Validate(); err == nil {
		t.Fatal("a negative --max-table-bytes was accepted")
	}
	if err := (Ceilings{MaxDescriptionBytes: -1}).Validate(); err == nil {
		t.Fatal("a negative description bound was accepted")
	}
}

func TestStableError(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`Get "http://127.0.0.1:8080/.well-known/toolplane/tools": read tcp 127.0.0.1:60364->127.0.0.1:8080: read: connection reset by peer`,
			`Get "http://127.0.0.1:8080/.well-known/toolplane/tools": read tcp 127.0.0.1:8080: read: connection reset by peer`},
		{`read tcp [::1]:41234->[::1]:8080: read: connection reset by peer`, `read tcp [::1]:8080: read: connection reset by peer`},
		{`dial tcp 10.0.0.7:8080: connect: connection refused`, `dial tcp 10.0.0.7:8080: connect: connection refused`},
	} {
		if got := stableError(errors.New(tt.in)); got != tt.want {
			t.Errorf("stableError(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
