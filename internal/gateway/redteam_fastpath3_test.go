package gateway_test

import (
	"strings"
	"testing"
)

// Red team (fast path, third round): requests that the fast path takes
// and answers, where the SDK answers otherwise.

// A 2026-07-28 call whose clientCapabilities hold a number no float64
// holds, inside experimental or extensions, is refused by the SDK: it
// decodes the whole _meta into a map (segmentio's decoder), which fails,
// so the call has no _meta protocol version and is answered with a 400.
// The fast path checks only that those members are objects, so it must
// leave such a call to the SDK, and answer as the SDK does. (A regression
// of 9a6d02a: fastMeta decoded the whole _meta with encoding/json before,
// which refuses such a number too; this spec passes at a980f09.)
func TestRedTeamFastPathAnswersAsTheSDKForCapabilitiesTheSDKCannotDecode(t *testing.T) {
	fx := newFastFixture(t)
	sdk, fast := newFastWorld(t, fx, false), newFastWorld(t, fx, true)
	era := "2026-07-28"
	ok := `{"text":"a","count":1}`
	for _, caps := range []string{
		`{"experimental":{"x":1e400}}`,
		`{"extensions":{"io.example/x":{"limit":-1e999}}}`,
		`{"experimental":{"x":1.8e308}}`,
		`{"experimental":{"x":` + strings.Repeat("9", 309) + `}}`,
	} {
		c := rawCall{
			name:   "clientCapabilities " + caps,
			target: "plain",
			path:   "/mcp",
			header: eraHeader(era, "crm_echo"),
			body:   strings.Replace(callBody(era, "1", "crm_echo", ok, ""), `clientCapabilities":{}`, `clientCapabilities":`+caps, 1),
		}
		want := sdk.do(t, fx, c)
		got := fast.do(t, fx, c)
		if got != want {
			t.Errorf("%s: the fast path answered\n%+v\nthe SDK\n%+v", c.name, got, want)
		}
	}
}

// A 2026-07-28 call whose arguments hold a number no float64 holds is
// refused by the SDK's standard headers' check: it reads the name from
// params decoded as CallToolParams, whose arguments are an any, and that
// decoding fails ("failed to extract name from parameters", a 400). The
// fast path passes the arguments on as sent and calls the tool. (This
// predates ad8baee..5257fd0: fastParams checked arguments so before.)
func TestRedTeamFastPathAnswersAsTheSDKForArgumentsTheSDKCannotDecode(t *testing.T) {
	fx := newFastFixture(t)
	sdk, fast := newFastWorld(t, fx, false), newFastWorld(t, fx, true)
	era := "2026-07-28"
	for _, args := range []string{
		`{"text":"a","count":1e400}`,
		`{"text":"a","count":1,"extra":[1.8e308]}`,
	} {
		c := rawCall{
			name:   "arguments " + args,
			target: "plain",
			path:   "/mcp",
			header: eraHeader(era, "crm_echo"),
			body:   callBody(era, "1", "crm_echo", args, ""),
		}
		want := sdk.do(t, fx, c)
		got := fast.do(t, fx, c)
		if got != want {
			t.Errorf("%s: the fast path answered\n%+v\nthe SDK\n%+v", c.name, got, want)
		}
	}
}
