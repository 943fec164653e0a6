// Package bindcases holds the repair and refusal cases of toolkit's binder,
// shared by the tests that call through Registry.Call and those that call
// through the HTTP invoke endpoint, so that both transports are held to the
// same table.
package bindcases

import (
	"strings"
	"time"
)

// Address is a nested object.
type Address struct {
	Street string `json:"street"`
	City   string `json:"city,omitempty"`
}

// In is the input of the tool every case binds to. The tool returns it
// unchanged, so that its structured result is what was bound.
type In struct {
	Name   string    `json:"name"`
	Count  int       `json:"count,omitempty"`
	Ratio  float64   `json:"ratio,omitempty"`
	Flag   bool      `json:"flag,omitempty"`
	Units  string    `json:"units,omitempty" tool:"enum=metric|imperial"`
	Tags   []string  `json:"tags,omitempty"`
	IDs    []int     `json:"ids,omitempty"`
	Addr   *Address  `json:"addr,omitempty"`
	Addrs  []Address `json:"addrs,omitempty"`
	When   time.Time `json:"when,omitzero"`
	Note   string    `json:"note,omitempty"`
	Nested any       `json:"nested,omitempty"`
	// Since round three.
	Codes map[int]string `json:"codes,omitempty"`
	Day   time.Time      `json:"day,omitzero" tool:"format=date"`
}

// Repair is arguments that are repaired, and the value they bind to.
type Repair struct {
	Name string
	Args string
	Want In
}

// Refusal is arguments that are refused, with the path of the problem and
// a part of its text that says why.
type Refusal struct {
	Name   string
	Args   string
	Path   string
	Reason string
}

// Repairs has one row per repair of the extended matrix.
var Repairs = []Repair{
	{"code-fenced JSON", "```json\n{\"name\":\"a\",\"count\":2}\n```", In{Name: "a", Count: 2}},
	{"code fence without a language", "```\n{\"name\":\"a\"}\n```", In{Name: "a"}},
	{"code-fenced JSON inside a string", `"` + "```json\\n{\\\"name\\\":\\\"a\\\"}\\n```" + `"`, In{Name: "a"}},
	{"a single string for an array of strings", `{"name":"a","tags":"x"}`, In{Name: "a", Tags: []string{"x"}}},
	{"a single number for an array of integers", `{"name":"a","ids":7}`, In{Name: "a", IDs: []int{7}}},
	{"a single object for an array of objects", `{"name":"a","addrs":{"street":"s"}}`, In{Name: "a", Addrs: []Address{{Street: "s"}}}},
	{"Python literals", `{"name":"a","flag":True,"addr":None}`, In{Name: "a", Flag: true}},
	{"Python False", `{"name":"a","flag":False,"count":1}`, In{Name: "a", Count: 1}},
	{"single-quoted strings", `{'name': 'a "quoted" b', 'units': 'metric'}`, In{Name: `a "quoted" b`, Units: "metric"}},
	{"single-quoted string with an escaped apostrophe", `{'name': 'O\'Brien'}`, In{Name: "O'Brien"}},
	{"Python dict with a trailing comma", `{'name': 'a', 'tags': ['x', 'y',],}`, In{Name: "a", Tags: []string{"x", "y"}}},
	{"a lone arguments wrapper", `{"arguments":{"name":"a","count":3}}`, In{Name: "a", Count: 3}},
	{"a lone input wrapper", `{"input":{"name":"a"}}`, In{Name: "a"}},
	{"a lone parameters wrapper holding a string", `{"parameters":"{\"name\":\"a\"}"}`, In{Name: "a"}},
	{"space around an enum value", `{"name":"a","units":" imperial "}`, In{Name: "a", Units: "imperial"}},
	{"space and case around an enum value", `{"name":"a","units":"Metric\n"}`, In{Name: "a", Units: "metric"}},
	{"space around a number", `{"name":"a","count":" 12 ","ratio":"\t2.5 "}`, In{Name: "a", Count: 12, Ratio: 2.5}},
	// v2, round three.
	{"a UTF-8 byte order mark before the object", "\ufeff{\"name\":\"a\"}", In{Name: "a"}},
	{"a single numeric string for an array of integers", `{"name":"a","ids":"8"}`, In{Name: "a", IDs: []int{8}}},
	{"a date-time with lower-case t and z", `{"name":"a","when":"2026-12-24t10:00:00z"}`, In{Name: "a", When: time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC)}},
	{"a leap second", `{"name":"a","when":"2016-12-31T23:59:60Z"}`, In{Name: "a", When: time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)}},
	{"a date for a time with format=date", `{"name":"a","day":"2026-12-24"}`, In{Name: "a", Day: time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)}},
	{"null for an optional pointer", `{"name":"a","addr":null,"tags":null}`, In{Name: "a"}},
}

// Refusals has one row per refusal of the extended matrix.
var Refusals = []Refusal{
	{"thousands separator", `{"name":"a","count":"15,000"}`, "$.count", "without thousands separators"},
	{"thousands separator with dots", `{"name":"a","ratio":"1.234.567"}`, "$.ratio", "without thousands separators"},
	{"NaN as a string", `{"name":"a","ratio":"NaN"}`, "$.ratio", "which JSON cannot carry"},
	{"bare NaN", `{"name":"a","ratio":NaN}`, "$.ratio", "NaN, which JSON cannot carry"},
	{"bare Infinity in an array", `{"name":"a","ids":[1,-Infinity]}`, "$.ids[1]", "-Infinity, which JSON cannot carry"},
	{"Infinity as a string", `{"name":"a","count":"Infinity"}`, "$.count", "which JSON cannot carry"},
	{"duplicate name", `{"name":"a","count":1,"count":2}`, "$.count", `"count" more than once`},
	{"duplicate name in a nested object", `{"name":"a","addr":{"street":"s","street":"t"}}`, "$.addr.street", `"street" more than once`},
	{"duplicate name, escaped", `{"name":"a","n\u0061me":"b"}`, "$.name", `"name" more than once`},
	{"duplicate name in a wrapped string", `{"name":"a","addr":"{\"street\":\"s\",\"street\":\"t\"}"}`, "$.addr.street", `"street" more than once`},
	{"trailing text", `{"name":"a"} and then some`, "$", "text after its end"},
	{"a second object", `{"name":"a"}{"name":"b"}`, "$", "text after its end"},
	{"a date for a date-time", `{"name":"a","when":"2026-11-30"}`, "$.when", "a date without a time of day"},
	{"nesting too deep", `{"name":"a","nested":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "$.nested" + strings.Repeat("[0]", 63), "nested at most 64 levels deep"},
	{"arguments too large", `{"name":"` + strings.Repeat("x", 1<<20) + `"}`, "$", "arguments of at most 1024 KiB"},
	{"an ambiguous single-quoted string", `{'name': 'O'Brien'}`, "$", "not JSON"},
	{"a wrapper around names the tool lacks", `{"arguments":{"nme":"a"}}`, "$.arguments", "unknown name"},
	// v2, round three.
	{"integer keys that are one key", `{"name":"a","codes":{"1":"x","01":"y"}}`, `$.codes["1"]`, `the same key as "01"`},
	{"null for an optional value", `{"name":"a","count":null}`, "$.count", "expected an integer, received null"},
	{"a date-time for a time with format=date", `{"name":"a","day":"2026-12-24T10:00:00Z"}`, "$.day", "a valid date string"},
}
