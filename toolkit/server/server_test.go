package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// The tools every test serves.

type echoIn struct {
	Text   string   `json:"text" description:"What to echo"`
	Count  int      `json:"count,omitempty" tool:"minimum=0;maximum=1000" default:"1"`
	Big    int64    `json:"big,omitempty"`
	Status string   `json:"status,omitempty" tool:"enum=created|paid|shipped"`
	Tags   []string `json:"tags,omitempty"`
	Flag   bool     `json:"flag,omitempty"`
}

type echoOut struct {
	Echo   string   `json:"echo"`
	Big    int64    `json:"big"`
	Status string   `json:"status"`
	Tags   []string `json:"tags"`
	Flag   bool     `json:"flag"`
}

func echo(_ context.Context, in echoIn) (echoOut, error) {
	return echoOut{Echo: strings.Repeat(in.Text, in.Count), Big: in.Big, Status: in.Status, Tags: in.Tags, Flag: in.Flag}, nil
}

type nameIn struct {
	Name string `json:"name"`
}

type ctxKey struct{}

type whoamiOut struct {
	Subject string   `json:"subject"`
	Scopes  []string `json:"scopes"`
	Header  string   `json:"header" description:"The X-Test request header"`
	Value   string   `json:"value" description:"A value an outer middleware put in the request context"`
}

func whoami(ctx context.Context, _ struct{}) (whoamiOut, error) {
	c, ok := toolkit.CallerFrom(ctx)
	if !ok {
		return whoamiOut{}, errors.New("no caller in the context")
	}
	v, _ := ctx.Value(ctxKey{}).(string)
	return whoamiOut{Subject: c.Subject, Scopes: c.Scopes, Header: c.Header.Get("X-Test"), Value: v}, nil
}

var errBroken = errors.New("the flux capacitor is broken")

func must(t *toolkit.Tool, err error) *toolkit.Tool {
	if err != nil {
		panic(err)
	}
	return t
}

func testRegistry(t testing.TB) *toolkit.Registry {
	t.Helper()
	reg := new(toolkit.Registry)
	err := reg.Add(
		must(toolkit.New("echo", "Echo the text count times", echo, toolkit.ReadOnly(), toolkit.Category("debug"))),
		must(toolkit.New("greet", "Greet someone", func(_ context.Context, in nameIn) (string, error) {
			return "Hello, " + in.Name + "!", nil
		}, toolkit.Title("Greeter"), toolkit.Destructive(false))),
		must(toolkit.New("broken", "Always fails", func(context.Context, nameIn) (string, error) {
			return "", errBroken
		})),
		must(toolkit.New("whoami", "Report the caller", whoami, toolkit.ReadOnly())),
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// callerMiddleware plays a service's own authentication: it sets the
// caller's subject and scopes, and a request-scoped value.
func callerMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := toolkit.WithCaller(r.Context(), toolkit.Caller{Subject: "alice", Scopes: []string{"crm:read"}})
		ctx = context.WithValue(ctx, ctxKey{}, "request-scoped")
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type testServer struct {
	*httptest.Server
	reg *toolkit.Registry
	h   *server.Handler
	// streams receives when a stream that carries notifications opens.
	streams chan struct{}
}

func newTestServer(t testing.TB, opts *server.Options) *testServer {
	t.Helper()
	reg := testRegistry(t)
	h := server.New(reg, opts)
	streams := make(chan struct{}, 1)
	srv := httptest.NewServer(observeStreams(streams, callerMiddleware(h)))
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return &testServer{Server: srv, reg: reg, h: h, streams: streams}
}

// observeStreams signals when a stream that carries notifications starts
// to answer: a 2025-era session's standalone GET stream, or a 2026-era
// subscriptions/listen. The SDK registers either before it writes to it,
// so from the signal on no notification is lost.
func observeStreams(opened chan<- struct{}, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == spec.MCPPath && (r.Method == http.MethodGet || r.Method == http.MethodPost && isListen(r)) {
			w = &writeObserver{ResponseWriter: w, opened: opened}
		}
		next.ServeHTTP(w, r)
	})
}

// isListen reports whether r is a subscriptions/listen request, leaving
// its body readable.
func isListen(r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte(`"subscriptions/listen"`))
}

type writeObserver struct {
	http.ResponseWriter
	opened chan<- struct{}
	status int
	once   sync.Once
}

func (o *writeObserver) WriteHeader(code int) {
	o.status = code
	o.ResponseWriter.WriteHeader(code)
}

func (o *writeObserver) Write(p []byte) (int, error) {
	if o.status == 0 || o.status == http.StatusOK {
		o.once.Do(func() {
			select {
			case o.opened <- struct{}{}:
			default:
			}
		})
	}
	return o.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the real writer's Flush.
func (o *writeObserver) Unwrap() http.ResponseWriter { return o.ResponseWriter }

func (s *testServer) do(t testing.TB, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (s *testServer) document(t testing.TB) (spec.Document, string) {
	t.Helper()
	resp, body := s.do(t, http.MethodGet, spec.DefaultPath, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET spec: %d %s", resp.StatusCode, body)
	}
	var doc spec.Document
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, resp.Header.Get("ETag")
}

func (s *testServer) invoke(t testing.TB, tool, args string) spec.CallResult {
	t.Helper()
	resp, body := s.do(t, http.MethodPost, spec.InvokePrefix+tool, args, "X-Test", "invoke")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke %s %s: %d %s", tool, args, resp.StatusCode, body)
	}
	var res spec.CallResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func wantError(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var e spec.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	if e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("error %+v, want code %s and a message", e.Error, code)
	}
}

func TestSpecDocument(t *testing.T) {
	s := newTestServer(t, &server.Options{Name: "crm-tools", Version: "1.4.2"})
	resp, body := s.do(t, http.MethodGet, spec.DefaultPath, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var doc spec.Document
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != spec.SchemaVersion || doc.Server != (spec.Server{Name: "crm-tools", Version: "1.4.2"}) {
		t.Errorf("header fields: %+v %+v", doc.SchemaVersion, doc.Server)
	}
	if !strings.HasPrefix(doc.Revision, "sha256:") || doc.Revision != s.reg.Revision() || doc.Revision != spec.Revision(doc.Tools) {
		t.Errorf("revision %q, registry %q", doc.Revision, s.reg.Revision())
	}
	if got := resp.Header.Get("ETag"); got != `"`+doc.Revision+`"` {
		t.Errorf("ETag %q for revision %q", got, doc.Revision)
	}
	var names []string
	for _, tool := range doc.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "broken,echo,greet,whoami" {
		t.Errorf("tools %v, want sorted by name", names)
	}
	echo := doc.Tools[1]
	if echo.Annotations == nil || echo.Annotations.ReadOnlyHint == nil || !*echo.Annotations.ReadOnlyHint || echo.Meta[spec.MetaCategory] != "debug" {
		t.Errorf("echo annotations %+v meta %v", echo.Annotations, echo.Meta)
	}
	// The document holds exactly what the registry declares.
	want, _ := json.Marshal(s.reg.Specs())
	got, _ := json.Marshal(doc.Tools)
	if string(got) != string(want) {
		t.Errorf("tools differ from the registry's:\n got %s\nwant %s", got, want)
	}
}

func TestSpecETagAnswers304(t *testing.T) {
	s := newTestServer(t, nil)
	doc, etag := s.document(t)

	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		resp, body := s.do(t, http.MethodGet, spec.DefaultPath, "", "If-None-Match", inm)
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("If-None-Match %s: %d, %d bytes", inm, resp.StatusCode, len(body))
		}
		if resp.Header.Get("ETag") != etag {
			t.Errorf("304 ETag %q, want %q", resp.Header.Get("ETag"), etag)
		}
	}
	resp, _ := s.do(t, http.MethodGet, spec.DefaultPath, "", "If-None-Match", `"sha256:stale"`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("stale If-None-Match: %d", resp.StatusCode)
	}

	// A change of the tool list changes the revision: the old ETag no longer matches.
	if err := s.reg.Add(must(toolkit.New("extra", "Another tool", echo))); err != nil {
		t.Fatal(err)
	}
	resp, body := s.do(t, http.MethodGet, spec.DefaultPath, "", "If-None-Match", etag)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a change: %d", resp.StatusCode)
	}
	var doc2 spec.Document
	if err := json.Unmarshal(body, &doc2); err != nil {
		t.Fatal(err)
	}
	if doc2.Revision == doc.Revision || resp.Header.Get("ETag") == etag || len(doc2.Tools) != len(doc.Tools)+1 {
		t.Errorf("after a change: revision %s (was %s), %d tools", doc2.Revision, doc.Revision, len(doc2.Tools))
	}
	// Removing it again restores the first revision: it depends on the list only.
	s.reg.Remove("extra")
	if doc3, etag3 := s.document(t); doc3.Revision != doc.Revision || etag3 != etag {
		t.Errorf("after removal: revision %s, want %s", doc3.Revision, doc.Revision)
	}
}

func TestSpecMethods(t *testing.T) {
	s := newTestServer(t, nil)
	resp, body := s.do(t, http.MethodHead, spec.DefaultPath, "")
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.Header.Get("ETag") == "" {
		t.Errorf("HEAD: %d, %d bytes, ETag %q", resp.StatusCode, len(body), resp.Header.Get("ETag"))
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		resp, body := s.do(t, m, spec.DefaultPath, "{}")
		wantError(t, resp, body, http.StatusMethodNotAllowed, server.CodeMethodNotAllowed)
		if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
			t.Errorf("%s: Allow %q", m, allow)
		}
	}
}

func TestSpecPathOption(t *testing.T) {
	s := newTestServer(t, &server.Options{SpecPath: "/tools.json"})
	if resp, _ := s.do(t, http.MethodGet, "/tools.json", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("custom path: %d", resp.StatusCode)
	}
	resp, body := s.do(t, http.MethodGet, spec.DefaultPath, "")
	wantError(t, resp, body, http.StatusNotFound, server.CodeNotFound)
}

func TestInvoke(t *testing.T) {
	s := newTestServer(t, nil)

	res := s.invoke(t, "echo", `{"text":"ab","count":2,"big":9007199254740993}`)
	if res.IsError || string(res.StructuredContent) == "" {
		t.Fatalf("result %+v", res)
	}
	var out echoOut
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
		t.Fatal(err)
	}
	// 2^53+1 survives: integers never pass through float64.
	if out.Echo != "abab" || out.Big != 9007199254740993 {
		t.Errorf("structured %s", res.StructuredContent)
	}
	if res.Text() != string(res.StructuredContent) {
		t.Errorf("text %q is not the structured JSON %s", res.Text(), res.StructuredContent)
	}

	if res := s.invoke(t, "greet", `{"name":"Changlu"}`); res.IsError || res.Text() != "Hello, Changlu!" || res.StructuredContent != nil {
		t.Errorf("string result %+v", res)
	}
	// No body is no arguments.
	if res := s.invoke(t, "whoami", ``); res.IsError {
		t.Errorf("empty body: %+v", res)
	}
}

func TestInvokeRepairsSloppyArguments(t *testing.T) {
	s := newTestServer(t, nil)
	// A model's usual mistakes: numbers and booleans as strings, an enum in
	// the wrong case, an array double-encoded, a trailing comma, and the
	// whole object wrapped in a string.
	for _, args := range []string{
		`{"text":"x","count":"3","flag":"true","status":"PAID","tags":"[\"a\",\"b\"]",}`,
		`"{\"text\":\"x\",\"count\":3,\"flag\":true,\"status\":\"paid\",\"tags\":[\"a\",\"b\"]}"`,
	} {
		res := s.invoke(t, "echo", args)
		if res.IsError {
			t.Errorf("%s: %s", args, res.Text())
			continue
		}
		var out echoOut
		if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
			t.Fatal(err)
		}
		if out.Echo != "xxx" || !out.Flag || out.Status != "paid" || strings.Join(out.Tags, ",") != "a,b" {
			t.Errorf("%s bound as %+v", args, out)
		}
	}
}

func TestInvokeErrorsAreResults(t *testing.T) {
	s := newTestServer(t, nil)
	// An argument error names the path, and the valid names for an unknown one.
	res := s.invoke(t, "echo", `{"txt":"x","count":1.5}`)
	if !res.IsError || !strings.Contains(res.Text(), "text") || !strings.Contains(res.Text(), "count") {
		t.Errorf("argument error %+v", res)
	}
	// An execution error is the tool's message, flagged.
	res = s.invoke(t, "broken", `{"name":"x"}`)
	if !res.IsError || !strings.Contains(res.Text(), errBroken.Error()) {
		t.Errorf("execution error %+v", res)
	}
	// A JSON value that is not an object is an argument error too, not a 400.
	if res := s.invoke(t, "echo", `[1,2]`); !res.IsError {
		t.Errorf("array arguments %+v", res)
	}
}

func TestInvokeHTTPErrors(t *testing.T) {
	s := newTestServer(t, &server.Options{MaxBodyBytes: 64})

	resp, body := s.do(t, http.MethodPost, "/tools/nope", `{}`)
	wantError(t, resp, body, http.StatusNotFound, server.CodeToolNotFound)
	if !strings.Contains(string(body), `nope`) {
		t.Errorf("404 does not name the tool: %s", body)
	}

	// A body that is not JSON even read leniently is the registry's to
	// refuse, with a result that says why, as on MCP.
	if res := s.invoke(t, "echo", `{"text": "x", oops}`); !res.IsError || !strings.Contains(res.Text(), "not JSON") {
		t.Errorf("non-JSON body: %+v", res)
	}

	resp, body = s.do(t, http.MethodPost, "/tools/echo", `{"text":"`+strings.Repeat("x", 64)+`"}`)
	wantError(t, resp, body, http.StatusRequestEntityTooLarge, server.CodeBodyTooLarge)

	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		resp, body := s.do(t, m, "/tools/echo", "")
		wantError(t, resp, body, http.StatusMethodNotAllowed, server.CodeMethodNotAllowed)
		if resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s: Allow %q", m, resp.Header.Get("Allow"))
		}
	}

	for _, path := range []string{"/", "/tools/", "/tools/echo/extra", "/nowhere"} {
		resp, body := s.do(t, http.MethodPost, path, `{}`)
		wantError(t, resp, body, http.StatusNotFound, server.CodeNotFound)
	}
}

func TestInvokeDefaultBodyLimitIsOneMiB(t *testing.T) {
	s := newTestServer(t, nil)
	body := func(size int) string {
		return `{"name":"` + strings.Repeat("x", size-len(`{"name":""}`)) + `"}`
	}
	// Exactly 1 MiB is served ...
	if res := s.invoke(t, "greet", body(server.DefaultMaxBodyBytes)); res.IsError || len(res.Text()) < 1<<19 {
		t.Errorf("a 1 MiB body was refused")
	}
	// ... one byte more is 413.
	resp, b := s.do(t, http.MethodPost, "/tools/greet", body(server.DefaultMaxBodyBytes+1))
	wantError(t, resp, b, http.StatusRequestEntityTooLarge, server.CodeBodyTooLarge)
}

func TestInvokeCarriesTheCaller(t *testing.T) {
	s := newTestServer(t, nil)
	res := s.invoke(t, "whoami", `{}`)
	var got whoamiOut
	if err := json.Unmarshal(res.StructuredContent, &got); err != nil {
		t.Fatalf("%+v: %v", res, err)
	}
	want := whoamiOut{Subject: "alice", Scopes: []string{"crm:read"}, Header: "invoke", Value: "request-scoped"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("caller %+v, want %+v", got, want)
	}
}

func TestInvokeFollowsTheRegistry(t *testing.T) {
	s := newTestServer(t, nil)
	s.reg.Remove("greet")
	resp, body := s.do(t, http.MethodPost, "/tools/greet", `{"name":"x"}`)
	wantError(t, resp, body, http.StatusNotFound, server.CodeToolNotFound)
	if err := s.reg.Add(must(toolkit.New("greet", "Greet again", func(_ context.Context, in nameIn) (string, error) {
		return "Hi " + in.Name, nil
	}))); err != nil {
		t.Fatal(err)
	}
	if res := s.invoke(t, "greet", `{"name":"x"}`); res.Text() != "Hi x" {
		t.Errorf("re-added tool: %+v", res)
	}
}
