package toolkit

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit/internal/bindcases"
)

type fastInner struct {
	City  string `json:"city,omitempty" default:"Paris"`
	Floor int8   `json:"floor,omitempty" tool:"exclusiveMinimum=-3;maximum=120.5"`
}

// fastIn holds every kind the fast binder takes, with every constraint it
// checks.
type fastIn struct {
	Name   string            `json:"name" tool:"minLength=1;maxLength=8"`
	Units  string            `json:"units,omitempty" tool:"enum=metric|imperial" default:"metric"`
	Days   int               `json:"days,omitempty" tool:"minimum=1;maximum=14" default:"3"`
	Small  int8              `json:"small,omitempty"`
	Big    int64             `json:"big,omitempty"`
	Count  uint16            `json:"count,omitempty" tool:"minimum=2"`
	Huge   uint64            `json:"huge,omitempty"`
	Ratio  float32           `json:"ratio,omitempty"`
	Flag   bool              `json:"flag,omitempty"`
	Tags   []string          `json:"tags,omitempty" tool:"minItems=1;maxItems=3;maxLength=4"`
	Loose  []int             `json:"loose"`
	Labels map[string]int    `json:"labels,omitempty"`
	Addr   *fastInner        `json:"addr,omitempty"`
	Home   fastInner         `json:"home,omitzero"`
	Data   []byte            `json:"data,omitempty"`
	Mode   string            `json:"mode,omitempty" default:"auto" tool:"nullAsMissing"`
	Opt    *string           `json:"opt,omitempty"`
	Nested map[string][]bool `json:"nested,omitempty"`
	Code   string            `json:"code,omitempty" pattern:"^[A-Z]{2}[0-9]?$"`
	Codes  []string          `json:"codes,omitempty" pattern:"^x"`
}

type withPattern struct {
	S string `json:"s" pattern:"^a"`
}

type withSensitive struct {
	P string `json:"p" tool:"sensitive"`
}

type withFloatBound struct {
	F float64 `json:"f" tool:"maximum=1"`
}

func TestFastBinderTakesTheTypesItChecks(t *testing.T) {
	for _, tc := range []struct {
		tool *Tool
		fast bool
	}{
		{MustNewAction("a", "", func(context.Context, fastIn) error { return nil }), true},
		{MustNewAction("b", "", func(context.Context, readmeOrder) error { return nil }), true},
		{MustNewAction("c", "", func(context.Context, bindIn) error { return nil }), false},       // any, RawMessage, time
		{MustNewAction("d", "", func(context.Context, bindcases.In) error { return nil }), false}, // any, time
		{MustNewAction("e", "", func(context.Context, withPattern) error { return nil }), true},
		{MustNewAction("f", "", func(context.Context, withSensitive) error { return nil }), false},
		{MustNewAction("g", "", func(context.Context, withFloatBound) error { return nil }), false},
	} {
		if got := tc.tool.runFast != nil; got != tc.fast {
			t.Errorf("%s: fast binder %t, want %t", tc.tool.Name(), got, tc.fast)
		}
	}
}

// fastTools returns tools that bind fastIn, readmeOrder and the benchmark
// shape, and the values they bound.
func fastTools(tb testing.TB) []*Tool {
	tb.Helper()
	return []*Tool{
		MustNew("fast", "", func(_ context.Context, in fastIn) (fastIn, error) { return in, nil }),
		MustNew("order", "", func(_ context.Context, in readmeOrder) (readmeOrder, error) { return in, nil }),
	}
}

// FuzzFastBindAgrees checks that the fast binder never accepts what the
// full path refuses, and binds what it accepts to the same value: it only
// ever skips work.
//
//	go test -run='^$' -fuzz='^FuzzFastBindAgrees$' -fuzztime=5s .
func FuzzFastBindAgrees(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","loose":null}`, `{"name":"a","loose":null,"home":{}}`, `{"name":"a","loose":[],"home":{"floor":3},"days":1}`,
		`{"name":"abc","loose":[1,2,-3],"units":"imperial","days":14,"small":-128,"big":9223372036854775807,"count":2,"huge":18446744073709551615}`,
		`{"name":"é😀","loose":[],"ratio":1.5e-3,"flag":true,"tags":["a","bcde"],"labels":{"k":1,"j":-2},"addr":{"floor":-2},"home":{"city":"Oslo"}}`,
		`{"name":"a","loose":[],"data":"aGk=","mode":null,"opt":null,"nested":{"x":[true,false],"y":null}}`,
		`{"name":"a","loose":[],"days":0}`, `{"name":"a","loose":[],"days":15}`, `{"name":"a","loose":[],"count":1}`,
		`{"name":"","loose":[]}`, `{"name":"123456789","loose":[]}`, `{"name":"a","loose":[],"tags":[]}`,
		`{"name":"a","loose":[],"units":"Metric"}`, `{"name":"a","loose":[],"name":"b"}`, `{"name":"a","loose":[],"mode":null,"mode":"x"}`,
		`{"name":"a","loose":[],"addr":{"floor":-3}}`, `{"name":"a","loose":[],"addr":{"floor":121}}`, `{"name":"a","loose":[],"small":128}`,
		`{"name":"a","loose":[5.0]}`, `{"name":"a","loose":["5"]}`, `{"name":"a","loose":[1e2]}`, `{"name":"a","loose":[-0]}`,
		`{"name":"a","loose":[]} `, `{"name":"a","loose":[]}x`, ` {"name":"a","loose":[]}`, `{"n\u0061me":"a","loose":[]}`,
		`{"name":"a\u00e9","loose":[]}`, "{\"name\":\"a\xff\",\"loose\":[]}", `{"NAME":"a","loose":[]}`, `{"arguments":{"name":"a","loose":[]}}`,
		`{"name":"a","loose":[],"home":{},"ratio":1e-400}`, `{"name":"a","loose":[],"home":{},"ratio":0.0e5}`,
		`{"name":"a","loose":[],"home":{},"code":"AB1","codes":["xy"]}`, `{"name":"a","loose":[],"home":{},"code":"ab"}`,
		`{"name":"a","loose":[],"home":{},"codes":["y"]}`, `{"name":"a","loose":[],"home":{},"code":"AB12"}`,
		`{"id":"O-1","status":"paid"}`, `{"id":"O-1"}`, `{"id":"O-1","status":null}`, `{"id":"O-1","status":"PAID"}`,
	} {
		f.Add([]byte(seed))
	}
	for _, c := range bindcases.Repairs {
		f.Add([]byte(c.Args))
	}
	tools := fastTools(f)
	f.Fuzz(func(t *testing.T, args []byte) {
		if len(args) > MaxArgumentBytes {
			return
		}
		for _, tool := range tools {
			fastRes, fastErr, ok := tool.runFast(context.Background(), args)
			if !ok {
				continue
			}
			slow := *tool
			slow.runFast = nil
			slowRes, slowErr := slow.call(context.Background(), args, nil)
			if fastErr != nil || slowErr != nil {
				t.Fatalf("%s %s: fast took it (%v), the full path says %v", tool.Name(), args, fastErr, slowErr)
			}
			if string(fastRes.StructuredContent) != string(slowRes.StructuredContent) {
				t.Fatalf("%s %s: bound differently\nfast: %s\nfull: %s", tool.Name(), args, fastRes.StructuredContent, slowRes.StructuredContent)
			}
			var fv, sv any
			_ = json.Unmarshal(fastRes.StructuredContent, &fv)
			_ = json.Unmarshal(slowRes.StructuredContent, &sv)
			if !reflect.DeepEqual(fv, sv) {
				t.Fatalf("%s: differ", tool.Name())
			}
		}
	})
}

func TestFastBinderTakesCleanArguments(t *testing.T) {
	tools := fastTools(t)
	for _, tc := range []struct {
		tool int
		args string
	}{
		{0, `{"name":"a","loose":null,"home":{}}`},
		{0, `{"name":"abc","loose":[1,2,-3],"units":"imperial","days":14,"small":-128,"big":9223372036854775807,"count":2,"huge":18446744073709551615,"home":{"floor":0}}`},
		{0, `{"name":"é😀","loose":[],"ratio":1.5e-3,"flag":true,"tags":["a","bcde"],"labels":{"k":1,"j":-2},"addr":{"floor":-2},"home":{"city":"Oslo"}}`},
		{0, `{"name":"a","loose":[],"data":"aGk=","mode":null,"opt":null,"nested":{"x":[true,false],"y":null},"home":{"city":""}}`},
		{1, `{"id":"O-1"}`},
		{0, `{"name":"a","loose":[],"home":{},"ratio":-0.0}`},
		{0, `{"name":"a","loose":[],"home":{},"code":"AB1","codes":["xy"]}`},
		{1, ` {"id":"O-1","status":"shipped"} `},
	} {
		if _, err, ok := tools[tc.tool].runFast(context.Background(), []byte(tc.args)); !ok || err != nil {
			t.Errorf("%s: the fast binder did not take %s (%v)", tools[tc.tool].Name(), tc.args, err)
		}
	}
}

func TestFastBinderLeavesUnderflowToTheFullPath(t *testing.T) {
	tool := fastTools(t)[0]
	for _, args := range []string{
		`{"name":"a","loose":[],"home":{},"ratio":1e-400}`,
		`{"name":"a","loose":[],"home":{},"ratio":1.` + strings.Repeat("1", 70) + `}`,
	} {
		if _, _, ok := tool.runFast(context.Background(), []byte(args)); ok {
			t.Errorf("the fast binder took %s", args)
		}
	}
}
