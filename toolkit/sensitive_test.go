package toolkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/metrics"
	"github.com/toolplane/toolplane/toolkit/tracing"
)

const secret = "hunter2-Sekret"

type loginCreds struct {
	Token string `json:"token" tool:"sensitive"`
}

type loginIn struct {
	User     string     `json:"user"`
	Password string     `json:"password" tool:"sensitive"`
	Creds    loginCreds `json:"creds,omitzero"`
	Note     string     `json:"note,omitempty"`
}

// login fails, quoting what it was given, as a careless tool does; and
// echoes the password in its result, which goes to the model but to no
// log.
func login(_ context.Context, in loginIn) (string, error) {
	if in.User == "fail" {
		return "", fmt.Errorf("login of %s with password %q failed (token %s)", in.User, in.Password, in.Creds.Token)
	}
	return "welcome " + in.User + " (" + in.Password + ")", nil
}

// sensitiveCalls exercise every path by which a value could leak: a clean
// call, the wrong type for the sensitive field itself (a number, an
// object, an array), a missing field next to it, a tool error that quotes
// it, sloppy text, double-encoding, a name in another case, and the
// secret given to a field that is not sensitive as well.
var sensitiveCalls = []string{
	`{"user":"ada","password":"` + secret + `"}`,
	`{"user":"ada","password":` + "1234567890123" + `}`,
	`{"user":"ada","password":{"nested":"` + secret + `"}}`,
	`{"user":"ada","password":["` + secret + `"]}`,
	`{"password":"` + secret + `"}`,
	`{"user":"fail","password":"` + secret + `","creds":{"token":"` + secret + `-tok"}}`,
	`{'user': 'ada', 'password': '` + secret + `',}`,
	`"{\"user\":\"ada\",\"PASSWORD\":\"` + secret + `\"}"`,
	`{"user":"ada","creds":"{\"token\":\"` + secret + `\"}","password":"x"}`,
	`{"user":"fail","password":"` + secret + `","note":"my password is ` + secret + `"}`,
	`{"user":"ada","password":"` + secret + `","bogus":1}`,
}

func TestSensitiveValuesAreNeverShown(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	promReg := prometheus.NewPedanticRegistry()
	mw, err := metrics.Middleware(promReg)
	if err != nil {
		t.Fatal(err)
	}
	reg := &toolkit.Registry{Logger: logger}
	reg.Use(toolkit.Logging(logger), tracing.Middleware(tracing.WithTracerProvider(tp)), mw)
	dyn, err := toolkit.NewDynamic("dyn_login", "", new(toolkit.Params).
		String("user", "").String("password", "", toolkit.Sensitive()).
		Object("creds", "", new(toolkit.Params).String("token", "", toolkit.Sensitive()), toolkit.Optional()).
		String("note", "", toolkit.Optional()).Schema(),
		func(_ context.Context, args map[string]any) (any, error) {
			return nil, fmt.Errorf("bad password %v", args["password"])
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(toolkit.MustNew("login", "", login), dyn); err != nil {
		t.Fatal(err)
	}

	for _, tool := range []string{"login", "dyn_login"} {
		var schema map[string]any
		spec, _ := reg.Lookup(tool)
		_ = json.Unmarshal(spec.Spec().InputSchema, &schema)
		if pw := schema["properties"].(map[string]any)["password"].(map[string]any); pw["writeOnly"] != true {
			t.Errorf("%s: password schema %v is not writeOnly", tool, pw)
		}
	}

	var texts []string
	for _, tool := range []string{"login", "dyn_login"} {
		for _, args := range sensitiveCalls {
			res, err := reg.Call(context.Background(), tool, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				texts = append(texts, res.Text())
			}
		}
	}
	// With errors propagated, the error itself is clean too, and still
	// matches what it wraps.
	reg.PropagateErrors = true
	for _, args := range sensitiveCalls {
		_, err := reg.Call(context.Background(), "login", json.RawMessage(args))
		if err != nil {
			texts = append(texts, err.Error())
		}
		if strings.Contains(args, `"password":1`) && !errors.Is(err, toolkit.ErrInvalidArguments) {
			t.Errorf("a redacted argument error no longer matches ErrInvalidArguments: %v", err)
		}
	}

	// Every error text: the model's, and a propagated error's.
	if len(texts) < 10 {
		t.Fatalf("only %d error texts; the calls did not fail as meant", len(texts))
	}
	for _, text := range texts {
		if strings.Contains(text, "hunter2") || strings.Contains(text, "1234567890123") {
			t.Errorf("an error shows the secret:\n%s", text)
		}
	}
	if !strings.Contains(strings.Join(texts, "\n"), `$.password: expected a string, received [redacted]`) {
		t.Errorf("the wrong-type error does not show [redacted]:\n%s", strings.Join(texts, "\n"))
	}

	// Logs at every level: Debug holds results, Info arguments, Warn errors.
	out := logs.String()
	for _, level := range []string{`"level":"INFO"`, `"level":"WARN"`, `"result":`} {
		if !strings.Contains(out, level) {
			t.Errorf("no %s in the logs; the test does not cover it", level)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "1234567890123") {
		t.Errorf("the logs show the secret:\n%s", out)
	}
	if !strings.Contains(out, `\"password\":\"[redacted]\"`) {
		t.Errorf("the logged arguments do not show the password as [redacted]:\n%s", out)
	}

	// Span names, attributes, status and events.
	spans := rec.Ended()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range spans {
		all := s.Name() + " " + s.Status().Description
		for _, a := range s.Attributes() {
			all += " " + string(a.Key) + "=" + a.Value.String()
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				all += " " + string(a.Key) + "=" + a.Value.String()
			}
		}
		if strings.Contains(all, "hunter2") || strings.Contains(all, "1234567890123") {
			t.Errorf("a span shows the secret: %s", all)
		}
	}

	// Metric labels.
	families, err := promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var m bytes.Buffer
	for _, f := range families {
		_, _ = expfmt.MetricFamilyToText(&m, f)
	}
	if m.Len() == 0 || strings.Contains(m.String(), "hunter2") {
		t.Errorf("metrics show the secret, or nothing:\n%s", m.String())
	}
}

type recordingReporter struct{ lines []string }

func (r *recordingReporter) Progress(_ context.Context, done, total float64, msg string) {
	r.lines = append(r.lines, fmt.Sprintf("%g/%g %s", done, total, msg))
}

func (r *recordingReporter) Log(_ context.Context, _ slog.Level, msg string) {
	r.lines = append(r.lines, msg)
}

func TestSensitiveValuesAreScrubbedFromWhatAToolReports(t *testing.T) {
	reg := new(toolkit.Registry)
	_ = reg.Add(toolkit.MustNewAction("report", "", func(ctx context.Context, in loginIn) error {
		toolkit.Progress(ctx, 1, 2, "logging in with "+in.Password)
		toolkit.Log(ctx, slog.LevelWarn, "password was "+in.Password)
		return nil
	}))
	rec := &recordingReporter{}
	ctx := toolkit.WithReporter(context.Background(), rec)
	if _, err := reg.Call(ctx, "report", json.RawMessage(`{"user":"ada","password":"`+secret+`"}`)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rec.lines, "\n")
	if len(rec.lines) != 2 || strings.Contains(got, "hunter2") || !strings.Contains(got, "[redacted]") {
		t.Errorf("reported:\n%s", got)
	}
}

// TestRedactionKeepsUnrelatedText: from the round-three review, a short
// sensitive value mangled the words around it, and a missing sensitive
// field read "received [redacted]", which hid what was wrong.
func TestRedactionKeepsUnrelatedText(t *testing.T) {
	type pinIn struct {
		PIN  string `json:"pin" tool:"sensitive"`
		Mode string `json:"mode" tool:"enum=fast|slow"`
	}
	reg := &toolkit.Registry{}
	if err := reg.Add(toolkit.MustNewAction("unlock", "", func(_ context.Context, in pinIn) error {
		return fmt.Errorf("expected another pin than %s for mode %s, or x", in.PIN, in.Mode)
	})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		want       []string // parts of the text
		not        []string
	}{
		{"a one-letter secret leaves words alone", `{"pin":"x","mode":"fast"}`,
			[]string{"expected another pin than [redacted] for mode fast, or [redacted]"}, []string{"e[redacted]pected"}},
		{"a short secret inside a word is no secret", `{"pin":"fa","mode":"fast"}`,
			[]string{"for mode fast"}, nil},
		{"a secret of four bytes is scrubbed inside a word too", `{"pin":"2468","mode":"fast"}`,
			[]string{"another pin than [redacted] for"}, []string{"2468"}},
		{"a missing sensitive field says nothing was sent", `{"mode":"fast"}`,
			[]string{"$.pin: expected a string (required), received nothing"}, []string{"received [redacted]"}},
		{"a wrong value for it is still not quoted", `{"pin":12345,"mode":"fast"}`,
			[]string{"$.pin: expected a string, received [redacted]"}, []string{"12345"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := reg.Call(context.Background(), "unlock", json.RawMessage(tc.args))
			if err != nil || !res.IsError {
				t.Fatalf("Call = %+v, %v", res, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text(), w) {
					t.Errorf("text does not say %q:\n%s", w, res.Text())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(res.Text(), n) {
					t.Errorf("text says %q:\n%s", n, res.Text())
				}
			}
		})
	}
}
