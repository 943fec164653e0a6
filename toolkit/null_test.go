package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type nullAddr struct {
	City string `json:"city,omitempty" default:"Paris"`
}

// nullIn has a field of each row of the table in the package
// documentation's "Null, missing and defaults".
type nullIn struct {
	Name   string         `json:"name"`
	Tags   []string       `json:"tags"`
	Must   []string       `json:"must" tool:"minItems=1"`
	Picks  []string       `json:"picks,omitempty" tool:"minItems=1"`
	Labels map[string]int `json:"labels,omitempty"`
	Opt    *nullAddr      `json:"opt,omitempty"`
	Home   nullAddr       `json:"home,omitzero"`
	Units  string         `json:"units,omitempty" default:"metric"`
	PUnits *string        `json:"punits,omitempty" default:"metric"`
	NUnits string         `json:"nunits,omitempty" default:"metric" tool:"nullAsMissing"`
	Codes  map[int]string `json:"codes,omitempty"`
	Day    time.Time      `json:"day,omitzero" tool:"format=date"`
	Days   []time.Time    `json:"days,omitempty" tool:"format=date"`
	When   time.Time      `json:"when,omitzero"`
	IDs    []int          `json:"ids,omitempty"`
	Flags  []bool         `json:"flags,omitempty"`
}

func nullBase(edit func(*nullIn)) nullIn {
	in := nullIn{Name: "a", Must: []string{"m"}, Home: nullAddr{City: "Paris"}, Units: "metric", PUnits: ptr("metric"), NUnits: "metric"}
	if edit != nil {
		edit(&in)
	}
	return in
}

func ptr[T any](v T) *T { return &v }

// TestNullMissingAndDefaults holds binding to the table of the package
// documentation, and to the review's binding findings of round three.
func TestNullMissingAndDefaults(t *testing.T) {
	got := new(nullIn)
	tool, err := NewAction("t", "", func(_ context.Context, in nullIn) error { *got = in; return nil })
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{PropagateErrors: true}
	if err := r.Add(tool); err != nil {
		t.Fatal(err)
	}
	const base = `"name":"a","tags":null,"must":["m"]`
	for _, tc := range []struct {
		name string
		args string
		want nullIn
		// refused, if set, is a part of the one problem's text.
		refused string
	}{
		{"a required slice may be null", `{` + base + `}`, nullBase(nil), ""},
		{"a required slice must be present", `{"name":"a","must":["m"]}`, nullIn{}, "$.tags: expected an array (required), received nothing"},
		{"minItems refuses null", `{"name":"a","tags":null,"must":null}`, nullIn{}, "$.must: expected an array, received null"},
		{"minItems refuses null where optional", `{` + base + `,"picks":null}`, nullIn{}, "$.picks: expected an array, received null"},
		{"an optional map may be null", `{` + base + `,"labels":null}`, nullBase(nil), ""},
		{"an absent optional pointer struct stays nil", `{` + base + `}`, nullBase(nil), ""},
		{"a null optional pointer struct is nil", `{` + base + `,"opt":null}`, nullBase(nil), ""},
		{"a given optional pointer struct takes its defaults", `{` + base + `,"opt":{}}`, nullBase(func(in *nullIn) { in.Opt = &nullAddr{City: "Paris"} }), ""},
		{"a value struct left out is made, for its defaults", `{` + base + `}`, nullBase(nil), ""},
		{"a default applies to a missing value", `{` + base + `}`, nullBase(nil), ""},
		{"null is refused for a value", `{` + base + `,"units":null}`, nullIn{}, "$.units: expected a string, received null"},
		{"a default does not apply to an explicit null", `{` + base + `,"punits":null}`, nullBase(func(in *nullIn) { in.PUnits = nil }), ""},
		{"nullAsMissing takes null as left out", `{` + base + `,"nunits":null}`, nullBase(nil), ""},
		{"integer keys that are one key are refused", `{` + base + `,"codes":{"1":"a","01":"b","001":"c"}}`, nullIn{}, `the same key as "001"`},
		{"distinct integer keys", `{` + base + `,"codes":{"1":"a","2":"b"}}`, nullBase(func(in *nullIn) { in.Codes = map[int]string{1: "a", 2: "b"} }), ""},
		{"a date for format=date", `{` + base + `,"day":"2026-12-24","days":["2026-01-02"]}`, nullBase(func(in *nullIn) {
			in.Day, in.Days = time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC), []time.Time{time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
		}), ""},
		{"a date-time for format=date", `{` + base + `,"day":"2026-12-24T10:00:00Z"}`, nullIn{}, "$.day: expected a valid date string"},
		{"lower-case t and z", `{` + base + `,"when":"2026-12-24t10:00:00z"}`, nullBase(func(in *nullIn) { in.When = time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC) }), ""},
		{"a leap second", `{` + base + `,"when":"2016-12-31T23:59:60Z"}`, nullBase(func(in *nullIn) { in.When = time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC) }), ""},
		{"a byte order mark before the object", "\ufeff{" + base + `}`, nullBase(nil), ""},
		{"a numeric string for an array of integers", `{` + base + `,"ids":"8"}`, nullBase(func(in *nullIn) { in.IDs = []int{8} }), ""},
		{"a boolean string for an array of booleans", `{` + base + `,"flags":"TRUE"}`, nullBase(func(in *nullIn) { in.Flags = []bool{true} }), ""},
		{"a word for an array of integers", `{` + base + `,"ids":"solo"}`, nullIn{}, `$.ids: expected an array`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*got = nullIn{}
			_, err := r.Call(context.Background(), "t", json.RawMessage(tc.args))
			if tc.refused != "" {
				var ae *ArgumentError
				if !errors.As(err, &ae) || !strings.Contains(ae.Error(), tc.refused) {
					t.Fatalf("err = %v, want a problem saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tc.want)
				t.Errorf("bound\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

type hiddenInner struct {
	Secret string `json:"secret"`
}

type embedsUnexportedPointer struct {
	*hiddenInner
	Name string `json:"name"`
}

type timeFormatEmail struct {
	At time.Time `json:"at" tool:"format=email"`
}

// TestDeclarationRefusesWhatCannotBind: a tool whose input binding can never
// fill fails when it is declared, not at every call.
func TestDeclarationRefusesWhatCannotBind(t *testing.T) {
	if _, err := NewAction("t", "", func(context.Context, embedsUnexportedPointer) error { return nil }); !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), "unexported embedded pointer") {
		t.Errorf("an unexported embedded pointer: err = %v", err)
	}
	if _, err := NewAction("t", "", func(context.Context, timeFormatEmail) error { return nil }); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("format=email on time.Time: err = %v", err)
	}
	// As an output it is fine: encoding/json reads through it.
	if _, err := New("t", "", func(context.Context, struct{}) (embedsUnexportedPointer, error) {
		return embedsUnexportedPointer{}, nil
	}); err != nil {
		t.Errorf("as an output: %v", err)
	}
}
