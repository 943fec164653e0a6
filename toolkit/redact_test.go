package toolkit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit"
)

func ExampleRedactor() {
	schema := json.RawMessage(`{"type":"object","properties":{
		"user":{"type":"string"},
		"password":{"type":"string","writeOnly":true}}}`)
	r, err := toolkit.NewRedactor(schema)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(r.Redact(json.RawMessage(`{"user":"ada","password":"hunter2"}`))))
	// Output: {"password":"[redacted]","user":"ada"}
}

func TestRedactorNeverShowsASensitiveValue(t *testing.T) {
	const secret = "s3cr3t-value"
	cases := []struct {
		name, schema, args string
		keep               string // a value that must still show, if any
	}{
		{"plain", `{"type":"object","properties":{"a":{"type":"string"},"k":{"type":"string","x-sensitive":true}}}`, `{"a":"visible","k":"` + secret + `"}`, "visible"},
		{"nested", `{"type":"object","properties":{"o":{"type":"object","properties":{"k":{"type":"string","writeOnly":true}}}}}`, `{"o":{"k":"` + secret + `"}}`, ""},
		{"double-encoded", `{"type":"object","properties":{"o":{"type":"object","properties":{"k":{"type":"string","writeOnly":true}}}}}`, `{"o":"{\"k\":\"` + secret + `\"}"}`, ""},
		{"other case", `{"type":"object","properties":{"Token":{"type":"string","writeOnly":true}}}`, `{"token":"` + secret + `"}`, ""},
		{"ref", `{"type":"object","$defs":{"S":{"type":"string","writeOnly":true}},"properties":{"k":{"$ref":"#/$defs/S"}}}`, `{"k":"` + secret + `"}`, ""},
		{"under oneOf", `{"type":"object","properties":{"c":{"oneOf":[{"type":"object","properties":{"k":{"type":"string","writeOnly":true}}},{"type":"string"}]}}}`, `{"c":{"k":"` + secret + `"}}`, ""},
		{"sloppy", `{"type":"object","properties":{"k":{"type":"string","writeOnly":true}}}`, `{"k":"` + secret + `",}`, ""},
		{"unreadable", `{"type":"object","properties":{"k":{"type":"string","writeOnly":true}}}`, `{"k":"` + secret, ""},
		{"wrapped", `{"type":"object","properties":{"k":{"type":"string","writeOnly":true}}}`, `{"arguments":{"k":"` + secret + `"}}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := toolkit.NewRedactor(json.RawMessage(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			out := r.Redact(json.RawMessage(c.args))
			if strings.Contains(string(out), secret) {
				t.Fatalf("Redact(%s) = %s: the sensitive value shows", c.args, out)
			}
			if !json.Valid(out) {
				t.Fatalf("Redact(%s) = %s: not JSON", c.args, out)
			}
			if c.keep != "" && !strings.Contains(string(out), c.keep) {
				t.Fatalf("Redact(%s) = %s: %q is gone", c.args, out, c.keep)
			}
		})
	}
}
