package controllers

import (
	"errors"
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
