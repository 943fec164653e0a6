package controllers

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// encodeDoc encodes a spec document of tools, as a toolkit server does.
func encodeDoc(t interface {
	Helper()
	Fatal(...any)
}, tools ...spec.Tool) []byte {
	t.Helper()
	spec.SortTools(tools)
	b, err := json.Marshal(spec.Document{SchemaVersion: spec.SchemaVersion, Revision: spec.Revision(tools), Server: spec.Server{Name: "t"}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDocument(t *testing.T) {
	valid := string(encodeDoc(t, tool("b"), tool("a")))
	tests := []struct {
		name, body string
		wantErr    string
		wantTools  []string
	}{
		{name: "valid", body: valid, wantTools: []string{"a", "b"}},
		{name: "unknown fields are ignored", body: `{"schemaVersion":"toolplane.io/v1alpha1","revision":"r","future":1,"tools":[{"name":"x","inputSchema":{"type":"object"},"icons":[]}]}`, wantTools: []string{"x"}},
		{name: "unsorted tools come back sorted", body: `{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"z"},{"name":"m"},{"name":"a"}]}`, wantTools: []string{"a", "m", "z"}},
		{name: "no tools", body: `{"schemaVersion":"toolplane.io/v1alpha1"}`, wantTools: []string{}},
		{name: "invalid JSON", body: `{"schemaVersion":`, wantErr: "decoding spec document"},
		{name: "not an object", body: `[1,2]`, wantErr: "decoding spec document"},
		{name: "trailing data", body: valid + `{}`, wantErr: "data after the JSON object"},
		{name: "other schema version", body: `{"schemaVersion":"v2","tools":[]}`, wantErr: `unsupported schemaVersion "v2"`},
		{name: "no schema version", body: `{"tools":[]}`, wantErr: `unsupported schemaVersion ""`},
		{name: "tools of the wrong type", body: `{"schemaVersion":"toolplane.io/v1alpha1","tools":{"a":1}}`, wantErr: "decoding spec document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := ParseDocument([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseDocument() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDocument() error = %v", err)
			}
			names := []string{}
			for _, tool := range doc.Tools {
				names = append(names, tool.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantTools, ",") {
				t.Errorf("tools = %v, want %v", names, tt.wantTools)
			}
			if doc.Revision == "" {
				t.Error("revision is empty; want the served one or a computed one")
			}
		})
	}
}

// FuzzParseDocument feeds the operator's parser arbitrary bodies, as a
// hostile or broken workload could serve. Whatever it accepts must
// re-encode into a document that parses the same, and must go through
// validation and assembly without a panic.
func FuzzParseDocument(f *testing.F) {
	f.Add(encodeDoc(f, tool("query_customer"), tool("get_order")))
	f.Add([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}},{"name":"a","inputSchema":{"type":"object"}}]}`))
	f.Add([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","revision":"sha256:00","tools":[{"name":"r","inputSchema":{"type":"object","$ref":"https://example.com/s.json"},"_meta":{"toolplane.io/version":"1"}}]}`))
	f.Add([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","tools":[{"name":"p","inputSchema":{"type":"object","properties":{"s":{"pattern":"(a+)+$"}}},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`))
	f.Add([]byte(`{"schemaVersion":"toolplane.io/v1alpha1","tools":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	ts := &v1alpha1.ToolSet{Spec: v1alpha1.ToolSetSpec{
		Prefix: "p_", Include: []string{"*"}, Exclude: []string{"x*"},
		Service: &v1alpha1.ServiceReference{Name: "svc", Port: 80},
		Limits:  v1alpha1.Limits{MaxTools: 256, MaxSchemaBytes: 4096},
	}}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := ParseDocument(body)
		if err != nil {
			if doc != nil {
				t.Fatal("ParseDocument returned a document with an error")
			}
			return
		}
		if doc.SchemaVersion != spec.SchemaVersion || doc.Revision == "" || doc.Tools == nil {
			t.Fatalf("accepted a document without its invariants: %+v", doc)
		}
		again, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("re-encoding an accepted document: %v", err)
		}
		doc2, err := ParseDocument(again)
		if err != nil {
			t.Fatalf("re-parsing an accepted document: %v\n%s", err, again)
		}
		if again2, _ := json.Marshal(doc2); !bytes.Equal(again, again2) {
			t.Fatalf("round trip changed the document:\n%s\n%s", again, again2)
		}
		a := assemble(ts, []*spec.Document{doc, doc2}, 0, "")
		if len(a.tools)+len(a.rejected) > len(doc.Tools) {
			t.Fatalf("assembled %d tools from %d", len(a.tools)+len(a.rejected), len(doc.Tools))
		}
		for _, tt := range a.tools {
			if !toolNameRE.MatchString(tt.Name) || tt.Endpoints == nil {
				t.Fatalf("offered an unchecked tool: %+v", tt)
			}
		}
	})
}

func TestValidateTool(t *testing.T) {
	limits := v1alpha1.Limits{MaxTools: 256, MaxSchemaBytes: 512}
	with := func(name, input, output string) spec.Tool {
		tl := spec.Tool{Name: name, InputSchema: json.RawMessage(input)}
		if output != "" {
			tl.OutputSchema = json.RawMessage(output)
		}
		return tl
	}
	tests := []struct {
		name      string
		published string
		tool      spec.Tool
		wantErr   string
	}{
		{"valid", "crm_q", with("q", `{"type":"object","properties":{"a":{"type":"integer","minimum":1}},"required":["a"]}`, ""), ""},
		{"local $ref and $defs", "r", with("r", `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"string"}}}`, ""), ""},
		{"valid output schema", "o", with("o", `{"type":"object"}`, `{"type":"object","properties":{"x":{"type":"number"}}}`), ""},
		{"draft-07 by $schema", "d", with("d", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, ""), ""},
		{"name with a space", "a b", with("a b", `{"type":"object"}`, ""), "does not match"},
		{"name too long", strings.Repeat("n", 129), with("n", `{"type":"object"}`, ""), "does not match"},
		{"name empty", "", with("", `{"type":"object"}`, ""), "does not match"},
		{"dot-dot source name", "p_..", with("..", `{"type":"object"}`, ""), "cannot be addressed"},
		{"no input schema", "x", with("x", ``, ""), "inputSchema is missing"},
		{"null input schema", "x", with("x", `null`, ""), "inputSchema is missing"},
		{"input schema not an object schema", "x", with("x", `{"type":"array"}`, ""), `"type": "object"`},
		{"input schema without type", "x", with("x", `{"properties":{}}`, ""), `"type": "object"`},
		{"input schema a boolean", "x", with("x", `true`, ""), `"type": "object"`},
		{"input schema that does not compile", "x", with("x", `{"type":"object","properties":{"a":{"minimum":"one"}}}`, ""), "does not compile"},
		{"input schema with a bad regexp", "x", with("x", `{"type":"object","properties":{"a":{"pattern":"("}}}`, ""), "does not compile"},
		{"remote $ref", "x", with("x", `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`, ""), "external $ref is not allowed"},
		{"file $ref", "x", with("x", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, ""), "external $ref is not allowed"},
		{"relative $ref under a remote $id", "x", with("x", `{"$id":"https://example.com/root.json","type":"object","properties":{"a":{"$ref":"other.json"}}}`, ""), "external $ref is not allowed"},
		{"input schema over the limit", "x", with("x", `{"type":"object","description":"`+strings.Repeat("d", 600)+`"}`, ""), "more than limits.maxSchemaBytes 512"},
		{"output schema not an object schema", "x", with("x", `{"type":"object"}`, `{"type":"string"}`), `outputSchema must be`},
		{"description over its bound", "x", describe(with("x", `{"type":"object"}`, ""), func(t *spec.Tool) { t.Description = strings.Repeat("d", 101) }),
			"description is 101 bytes, more than 100 (--max-tool-description-bytes)"},
		{"title over its bound", "x", describe(with("x", `{"type":"object"}`, ""), func(t *spec.Tool) { t.Title = strings.Repeat("t", 21) }),
			"title is 21 bytes, more than 20 (--max-tool-title-bytes)"},
		{"annotations' title over its bound", "x", describe(with("x", `{"type":"object"}`, ""), func(t *spec.Tool) { t.Annotations = &spec.Annotations{Title: strings.Repeat("t", 21)} }),
			"annotations.title is 21 bytes"},
		{"annotations over their bound", "x", describe(with("x", `{"type":"object"}`, ""), func(t *spec.Tool) { t.Annotations = &spec.Annotations{Title: strings.Repeat("t", 20)} }),
			"more than 30 (--max-tool-annotations-bytes)"},
		{"_meta over its bound", "x", describe(with("x", `{"type":"object"}`, ""), func(t *spec.Tool) { t.Meta = map[string]any{"k": strings.Repeat("m", 60)} }),
			"more than 50 (--max-tool-meta-bytes)"},
		{"everything at its bound", "x", describe(with("x", `{"type":"object"}`, ""), func(t *spec.Tool) {
			t.Description, t.Title, t.Meta = strings.Repeat("d", 100), strings.Repeat("t", 20), map[string]any{"k": strings.Repeat("m", 42)}
		}), ""},
		// Refused before the compiler expands them, which took 0.1 s of CPU
		// for each such number.
		{"a huge exponent in the input schema", "x", with("x", `{"type":"object","properties":{"a":{"minimum":1e999999}}}`, ""), "1e999999 is beyond what a 64-bit float holds"},
		{"a tiny exponent in the output schema", "x", with("x", `{"type":"object"}`, `{"type":"object","properties":{"a":{"multipleOf":1e-999999}}}`), "outputSchema: the number 1e-999999"},
	}
	bounds := toolBounds{description: 100, title: 20, annotations: 30, meta: 50}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateTool(tt.published, tt.tool, limits, bounds)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validateTool() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("validateTool() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestAssembleIsIndependentOfPodOrder(t *testing.T) {
	formX, formY := tool("a"), tool("a")
	formX.Description, formY.Description = "x", "y"
	d1 := &spec.Document{Revision: "r1", Tools: []spec.Tool{formX}}
	d2 := &spec.Document{Revision: "r2", Tools: []spec.Tool{formY}}
	ts := &v1alpha1.ToolSet{}
	// One Pod each: a tie, broken by the forms' bytes, never by order.
	a12, a21 := assemble(ts, []*spec.Document{d1, d2}, 0, ""), assemble(ts, []*spec.Document{d2, d1}, 0, "")
	if len(a12.tools) != 1 || len(a21.tools) != 1 || a12.tools[0].Description != a21.tools[0].Description {
		t.Fatalf("assembly depends on the order of the Pods: %+v vs %+v", a12.tools, a21.tools)
	}
	if a12.revision != a21.revision || a12.skew != a21.skew || a12.skew == "" {
		t.Fatalf("revision or skew depends on the order: %q/%q vs %q/%q", a12.revision, a12.skew, a21.revision, a21.skew)
	}
}

func TestNewRoundCountsFailedReadyPods(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
	}
	both := &spec.Document{Revision: "r1", Tools: []spec.Tool{tool("x"), tool("y")}}
	onlyX := &spec.Document{Revision: "r2", Tools: []spec.Tool{tool("x")}}
	ok, known, blind := pod("ok"), pod("known"), pod("blind")
	results := []podResult{{pod: ok, doc: both}, {pod: known, err: errors.New("down")}, {pod: blind, err: errors.New("down")}}
	rd := newRound([]*corev1.Pod{ok, known, blind}, results, nil, podDocs{{uid: "known", doc: onlyX}})
	if len(rd.docs) != 1 || len(rd.lastKnown) != 1 || rd.lastKnown[0] != onlyX || rd.blind != 1 {
		t.Fatalf("round = %d fresh, %d last known, %d blind; want 1, 1 (onlyX), 1", len(rd.docs), len(rd.lastKnown), rd.blind)
	}

	ts := &v1alpha1.ToolSet{}
	a := assemble(ts, append(rd.docs, rd.lastKnown...), 0, "")
	if len(a.tools) != 1 || a.tools[0].Name != "x" {
		t.Fatalf("with the failed Pod's last document, offered %+v; want only x", a.tools)
	}
	a = assemble(ts, append(rd.docs, rd.lastKnown...), rd.blind, "")
	if len(a.tools) != 0 || a.count(v1alpha1.ToolSkewed) != 2 {
		t.Fatalf("with a Pod never scraped, offered %+v; want nothing, both Skewed", a.tools)
	}
	for _, r := range a.rejected {
		if !strings.Contains(r.Reason, "of 3 ready Pods") {
			t.Errorf("reason %q does not count every ready Pod", r.Reason)
		}
	}
}

func TestResolvePort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}},
		{Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "http", ContainerPort: 8080}}},
	}}}
	if p, err := resolvePort(pod, intstr.FromString("http")); err != nil || p != 8080 {
		t.Errorf("by name: %d, %v; want 8080", p, err)
	}
	if p, err := resolvePort(pod, intstr.FromInt32(7000)); err != nil || p != 7000 {
		t.Errorf("by number: %d, %v; want 7000", p, err)
	}
	if _, err := resolvePort(pod, intstr.FromString("dns")); err == nil {
		t.Error("a UDP port was accepted")
	}
	if _, err := resolvePort(pod, intstr.FromString("grpc")); err == nil || !strings.Contains(err.Error(), `no TCP container port named "grpc"`) {
		t.Errorf("a missing port: %v", err)
	}
}

func TestFetch(t *testing.T) {
	body := encodeDoc(t, tool("a"))
	target := func(maxTools int32) scrapeTarget {
		return scrapeTarget{
			spec:    &v1alpha1.ToolSetSpec{Path: spec.DefaultPath, Scheme: "http", Limits: v1alpha1.Limits{MaxTools: maxTools}},
			timeout: 2 * time.Second,
			creds:   &credentials.Credentials{BearerToken: "t0ken"},
		}
	}
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL + spec.DefaultPath
	}
	fetch := func(s *scraper, tgt scrapeTarget, url string, prev *spec.Document) (*spec.Document, error) {
		c := tgt.httpClient()
		defer c.CloseIdleConnections()
		return s.fetch(context.Background(), c, tgt, url, prev)
	}

	t.Run("a body of exactly the limit passes, one byte more fails", func(t *testing.T) {
		padded := append(bytes.Clone(body), bytes.Repeat([]byte(" "), 100)...)
		url := serve(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(padded) })
		if _, err := fetch(newScraper(1, int64(len(padded))), target(0), url, nil); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		_, err := fetch(newScraper(1, int64(len(padded)-1)), target(0), url, nil)
		if !errors.Is(err, errTooLarge) || scrapeReason(err) != scrapeErrTooLarge {
			t.Fatalf("over the limit: %v", err)
		}
	})
	t.Run("a _meta of maps within the limit fails before it is decoded; schemas of the same size pass", func(t *testing.T) {
		const limit = 1 << 20
		maps := strings.Repeat(`{"a":0},`, (limit-4096)/8)
		metaDoc := []byte(`{"schemaVersion":"` + spec.SchemaVersion + `","tools":[{"name":"a","inputSchema":{"type":"object"},"_meta":{"x":[` + maps + `{}]}}]}`)
		url := serve(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(metaDoc) })
		_, err := fetch(newScraper(1, limit), target(0), url, nil)
		if !errors.Is(err, errTooLarge) || !strings.Contains(err.Error(), "_meta") {
			t.Fatalf("got %v, want errTooLarge for _meta", err)
		}
		// encoding/json takes these for _meta as well.
		for _, name := range []string{`_META`, `\u005fmeta`} {
			other := bytes.Replace(metaDoc, []byte(`"_meta"`), []byte(`"`+name+`"`), 1)
			url := serve(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(other) })
			if _, err := fetch(newScraper(1, limit), target(0), url, nil); !errors.Is(err, errTooLarge) {
				t.Fatalf("%s: got %v, want errTooLarge", name, err)
			}
		}
		schemaDoc := []byte(`{"schemaVersion":"` + spec.SchemaVersion + `","tools":[{"name":"a","inputSchema":{"type":"object","x":[` + maps + `{}]}}]}`)
		url = serve(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(schemaDoc) })
		if _, err := fetch(newScraper(1, limit), target(0), url, nil); err != nil {
			t.Fatalf("the same bytes as a raw schema: %v", err)
		}
	})
	t.Run("a gzip bomb is capped after decompression", func(t *testing.T) {
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		_, _ = zw.Write(bytes.Repeat([]byte(" "), 8<<20))
		_ = zw.Close()
		url := serve(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped.Bytes())
		})
		if _, err := fetch(newScraper(1, 1<<20), target(0), url, nil); !errors.Is(err, errTooLarge) {
			t.Fatalf("got %v, want errTooLarge", err)
		}
	})
	t.Run("If-None-Match and 304 reuse the previous document", func(t *testing.T) {
		prev, _ := ParseDocument(body)
		var gotINM, gotAuth string
		url := serve(func(w http.ResponseWriter, r *http.Request) {
			gotINM, gotAuth = r.Header.Get("If-None-Match"), r.Header.Get("Authorization")
			w.WriteHeader(http.StatusNotModified)
		})
		doc, err := fetch(newScraper(1, 0), target(0), url, prev)
		if err != nil || doc != prev {
			t.Fatalf("got %v, %v; want the previous document", doc, err)
		}
		if gotINM != spec.ETag(prev.Revision) || gotAuth != "" {
			t.Fatalf("If-None-Match %q, Authorization %q", gotINM, gotAuth)
		}
		if _, err := fetch(newScraper(1, 0), target(0), url, nil); !errors.Is(err, errNotModifiedCold) {
			t.Fatalf("a 304 with no previous document: %v", err)
		}
	})
	t.Run("a 304 is held to limits.maxTools as it is now", func(t *testing.T) {
		prev, _ := ParseDocument(encodeDoc(t, tool("a"), tool("b"), tool("c")))
		url := serve(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotModified) })
		if _, err := fetch(newScraper(1, 0), target(3), url, prev); err != nil {
			t.Fatalf("within the limit: %v", err)
		}
		// The user lowered the limit since the document was fetched.
		_, err := fetch(newScraper(1, 0), target(2), url, prev)
		if scrapeReason(err) != scrapeErrTooMany || !strings.Contains(err.Error(), "3 tools, more than limits.maxTools 2") {
			t.Fatalf("a cached document over the lowered limit: %v", err)
		}
	})
	t.Run("a bearer token goes over https only, never over plain http", func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Header.Get("Authorization"))
			mu.Unlock()
			_, _ = w.Write(body)
		})
		plain := httptest.NewServer(record)
		t.Cleanup(plain.Close)
		secure := httptest.NewTLSServer(record)
		t.Cleanup(secure.Close)

		// A spec that says http, as one stored before the API refused it.
		if _, err := fetch(newScraper(1, 0), target(0), plain.URL+spec.DefaultPath, nil); err != nil {
			t.Fatal(err)
		}
		tls := target(0)
		tls.spec.Scheme = "https"
		tls.creds.TLS = secure.Client().Transport.(*http.Transport).TLSClientConfig
		if _, err := fetch(newScraper(1, 0), tls, secure.URL+spec.DefaultPath, nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(got, []string{"", "Bearer t0ken"}) {
			t.Fatalf("Authorization headers received = %q; want none over http, the token over https", got)
		}
	})
	t.Run("a redirect on the same host is followed, to another host refused", func(t *testing.T) {
		url := serve(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case spec.DefaultPath:
				http.Redirect(w, r, "/moved", http.StatusFound)
			case "/moved":
				_, _ = w.Write(body)
			}
		})
		if _, err := fetch(newScraper(1, 0), target(0), url, nil); err != nil {
			t.Fatalf("same host: %v", err)
		}
		elsewhere := serve(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
		away := serve(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, strings.Replace(elsewhere, "127.0.0.1", "localhost", 1), http.StatusFound)
		})
		_, err := fetch(newScraper(1, 0), target(0), away, nil)
		if !errors.Is(err, errRedirectHost) || scrapeReason(err) != scrapeErrRedirect {
			t.Fatalf("another host: %v", err)
		}
	})
	t.Run("more tools than maxTools rejects the document", func(t *testing.T) {
		url := serve(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(encodeDoc(t, tool("a"), tool("b"))) })
		_, err := fetch(newScraper(1, 0), target(1), url, nil)
		if scrapeReason(err) != scrapeErrTooMany || !strings.Contains(err.Error(), "2 tools, more than limits.maxTools 1") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a slow server times out", func(t *testing.T) {
		url := serve(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		tgt := target(0)
		tgt.timeout = 50 * time.Millisecond
		_, err := fetch(newScraper(1, 0), tgt, url, nil)
		if scrapeReason(err) != scrapeErrTimeout || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("got %v", err)
		}
	})
}

// BenchmarkAssemble measures one round of validation and assembly of a
// ToolSet of 256 tools over 3 Pods, with and without reuse of the last
// round's assembly (what a round of 304s costs).
func BenchmarkAssemble(b *testing.B) {
	var tools []spec.Tool
	for i := range 256 {
		tl := tool("tool_" + strconv.Itoa(i))
		tl.InputSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z0-9-]+$"},"n":{"type":"integer","minimum":0,"maximum":100},"tags":{"type":"array","items":{"type":"string"}}},"required":["id"]}`)
		tools = append(tools, tl)
	}
	doc, err := ParseDocument(encodeDoc(b, tools...))
	if err != nil {
		b.Fatal(err)
	}
	docs := []*spec.Document{doc, doc, doc}
	ts := &v1alpha1.ToolSet{Spec: v1alpha1.ToolSetSpec{Limits: v1alpha1.Limits{MaxTools: 256, MaxSchemaBytes: 65536}}}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			_ = assemble(ts, docs, 0, "")
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		mem := &toolSetMemory{}
		for b.Loop() {
			_ = mem.assemble(ts, docs, 0, defaultToolBounds, "")
		}
	})
}

// BenchmarkFetch measures one scrape of a 256-tool document from a toolkit-
// like server on loopback: a full GET and parse, against a conditional GET
// answered 304.
func BenchmarkFetch(b *testing.B) {
	var tools []spec.Tool
	for i := range 256 {
		tools = append(tools, tool("tool_"+strconv.Itoa(i)))
	}
	body := encodeDoc(b, tools...)
	prev, err := ParseDocument(body)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == spec.ETag(prev.Revision) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	s := newScraper(1, 0)
	tgt := scrapeTarget{spec: &v1alpha1.ToolSetSpec{Path: spec.DefaultPath, Scheme: "http"}, timeout: 5 * time.Second}
	for _, bc := range []struct {
		name string
		prev *spec.Document
	}{{"full", nil}, {"not-modified", prev}} {
		b.Run(bc.name, func(b *testing.B) {
			c := tgt.httpClient()
			for b.Loop() {
				if _, err := s.fetch(context.Background(), c, tgt, srv.URL+spec.DefaultPath, bc.prev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestScrapeAllStaysWithinTheManagerWideBound scrapes 6 Pods of one
// ToolSet through a scraper that allows 2 scrapes at once: the server never
// sees more than 2 requests in flight, and every Pod is scraped.
func TestScrapeAllStaysWithinTheManagerWideBound(t *testing.T) {
	body := encodeDoc(t, tool("a"))
	var (
		mu       sync.Mutex
		inflight int
		maxSeen  int
	)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		inflight++
		maxSeen = max(maxSeen, inflight)
		mu.Unlock()
		<-release
		mu.Lock()
		inflight--
		mu.Unlock()
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)

	var pods []*corev1.Pod
	for i := range 6 {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + strconv.Itoa(i), UID: types.UID(strconv.Itoa(i))},
			Status:     corev1.PodStatus{PodIP: "127.0.0.1"},
		})
	}
	tgt := scrapeTarget{
		spec:    &v1alpha1.ToolSetSpec{Port: intstr.FromInt(portNum), Path: spec.DefaultPath, Scheme: "http"},
		timeout: 30 * time.Second,
	}
	done := make(chan []podResult)
	go func() { done <- newScraper(2, 0).scrapeAll(context.Background(), tgt, pods, nil) }()

	// Let requests through one at a time once the bound is reached.
	for released := 0; released < len(pods); {
		mu.Lock()
		n := inflight
		mu.Unlock()
		if n >= 2 || (n > 0 && len(pods)-released < 2) {
			release <- struct{}{}
			released++
			continue
		}
		runtime.Gosched()
	}
	results := <-done
	if maxSeen != 2 {
		t.Errorf("at most %d scrapes were in flight, want exactly the bound 2", maxSeen)
	}
	for _, res := range results {
		if res.err != nil || len(res.doc.Tools) != 1 {
			t.Errorf("pod %s: %v", res.pod.Name, res.err)
		}
	}
}

func TestCapToolsKeepsWhatSaysMost(t *testing.T) {
	var tools []v1alpha1.ToolStatus
	for i := range 1000 {
		tools = append(tools, v1alpha1.ToolStatus{Name: "p" + strconv.Itoa(i), State: v1alpha1.ToolPublished})
	}
	tools = append(tools,
		v1alpha1.ToolStatus{Name: "zz_invalid", State: v1alpha1.ToolInvalid},
		v1alpha1.ToolStatus{Name: "zz_conflicted", State: v1alpha1.ToolConflicted},
		v1alpha1.ToolStatus{Name: "a_filtered", State: v1alpha1.ToolFiltered},
	)
	kept, omitted := capTools(tools, maxStatusTools)
	if len(kept) != maxStatusTools || omitted != 3 {
		t.Fatalf("kept %d, omitted %d; want %d and 3", len(kept), omitted, maxStatusTools)
	}
	states := map[v1alpha1.ToolState]int{}
	for _, k := range kept {
		states[k.State]++
	}
	if states[v1alpha1.ToolInvalid] != 1 || states[v1alpha1.ToolConflicted] != 1 || states[v1alpha1.ToolFiltered] != 1 {
		t.Errorf("a tool with something to say was left out: %v", states)
	}
	if !slices.IsSortedFunc(kept, func(x, y v1alpha1.ToolStatus) int { return strings.Compare(x.Name, y.Name) }) {
		t.Error("the kept tools are not sorted by name")
	}
}

// TestValidateSpec checks the admission rules again for objects stored
// before them: validation ratcheting lets such an object stay, and the
// reconciler must still refuse to act on it.
func TestValidateSpec(t *testing.T) {
	token := &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: "s", Key: "k"}}
	tests := []struct {
		name string
		spec v1alpha1.ToolSetSpec
		want string
	}{
		{"valid", v1alpha1.ToolSetSpec{Scheme: "https", Authorization: token, Service: &v1alpha1.ServiceReference{Name: "crm-tools", Port: 80}}, ""},
		{"token over http", v1alpha1.ToolSetSpec{Scheme: "http", Authorization: token}, "never sent over plain http"},
		{"service name with a host", v1alpha1.ToolSetSpec{Service: &v1alpha1.ServiceReference{Name: "evil.example:80/x#", Port: 80}}, "spec.service.name"},
		{"service name upper-case", v1alpha1.ToolSetSpec{Service: &v1alpha1.ServiceReference{Name: "CRM", Port: 80}}, "spec.service.name"},
		{"service scheme", v1alpha1.ToolSetSpec{Service: &v1alpha1.ServiceReference{Name: "crm", Port: 80, Scheme: "gopher"}}, "spec.service.scheme"},
		{"bad glob", v1alpha1.ToolSetSpec{Include: []string{"["}}, "spec.include"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateSpec(&tt.spec)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("validateSpec() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestServiceURL checks that the published endpoints name the ToolSet's own
// namespace, fully qualified in the cluster domain, and take the scheme
// from the Service, else from the scrape.
func TestServiceURL(t *testing.T) {
	ts := &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "crm", Name: "t"}, Spec: v1alpha1.ToolSetSpec{Scheme: "https"}}
	svc := &v1alpha1.ServiceReference{Name: "crm-tools", Port: 8443}
	if got := serviceURL(ts, svc, "/tools/get.order", ""); got != "https://crm-tools.crm.svc.cluster.local:8443/tools/get.order" {
		t.Errorf("scheme from spec.scheme: %s", got)
	}
	svc.Scheme = "http"
	if got := serviceURL(ts, svc, spec.MCPPath, "corp.example"); got != "http://crm-tools.crm.svc.corp.example:8443/mcp" {
		t.Errorf("scheme from spec.service.scheme, in another cluster domain: %s", got)
	}
	// What the operator publishes, toolkit/discovery and the gateway call.
	if _, err := discovery.CheckServiceEndpoint(serviceURL(ts, svc, spec.MCPPath, ""), ts.Namespace, ""); err != nil {
		t.Errorf("the published endpoint is refused by discovery: %v", err)
	}
}

// describe returns t changed by fn.
func describe(t spec.Tool, fn func(*spec.Tool)) spec.Tool {
	fn(&t)
	return t
}

// TestAssembleKeepsEqualToolsOnce: a document scraped again, a new object
// with the same tools, assembles into the last round's very slice, which
// the baseline and the publisher's claim already hold; a changed one into
// a slice of its own.
func TestAssembleKeepsEqualToolsOnce(t *testing.T) {
	parse := func(tools ...spec.Tool) *spec.Document {
		doc, err := ParseDocument(encodeDoc(t, tools...))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	ts := &v1alpha1.ToolSet{Spec: v1alpha1.ToolSetSpec{Limits: v1alpha1.Limits{MaxTools: 16, MaxSchemaBytes: 65536}}}
	mem := &toolSetMemory{}
	first := mem.assemble(ts, []*spec.Document{parse(tool("a"), tool("b"))}, 0, defaultToolBounds, "")
	again := mem.assemble(ts, []*spec.Document{parse(tool("a"), tool("b"))}, 0, defaultToolBounds, "")
	if len(first.tools) != 2 || len(again.tools) != 2 || &first.tools[0] != &again.tools[0] {
		t.Fatalf("an equal document assembled into a new slice: %p and %p", first.tools, again.tools)
	}
	changed := tool("b")
	changed.Description = "changed"
	other := mem.assemble(ts, []*spec.Document{parse(tool("a"), changed)}, 0, defaultToolBounds, "")
	if len(other.tools) != 2 || &other.tools[0] == &first.tools[0] || other.tools[1].Description != "changed" {
		t.Fatalf("a changed document kept the last slice: %+v", other.tools)
	}
	if first.tools[1].Description == "changed" {
		t.Fatal("the last slice was modified")
	}
}
