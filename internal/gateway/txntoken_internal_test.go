package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzTxnTokenClaimsJSON holds the claims' own encoder to json.Marshal,
// byte for byte, whatever the strings (quotes, controls, HTML, invalid
// UTF-8, U+2028) and whichever fields are empty:
//
//	go test -run '^$' -fuzz FuzzTxnTokenClaimsJSON -fuzztime 20s ./internal/gateway/
func FuzzTxnTokenClaimsJSON(f *testing.F) {
	f.Add("https://gw.test", "system:serviceaccount:crm:agent", "crm/crm-tools", "req-1", "g1", "g2", "crm_echo", "echo", "kubernetes", "4bf92f3577b34da6a3ce929d0e0e4736", int64(1700000000))
	f.Add("", "alice@example.com", "ns/name", "", "", "", "t", "t", "", "", int64(-1))
	f.Add("a\"b\\c", "<script>&", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe", "é中🙂", "\t\n\r", "", "oidc", "", int64(0))
	f.Fuzz(func(t *testing.T, iss, sub, aud, txn, g1, g2, tool, source, authn, traceID string, iat int64) {
		c := txnTokenClaims{Issuer: iss, Subject: sub, Audience: aud, IssuedAt: iat, Expiry: iat + 60, Txn: txn,
			RequestingWorkload: "toolplane-gateway", Tctx: txnContext{Tool: tool, SourceTool: source},
			Rctx: requestContext{Authn: authn, TraceID: traceID}}
		for _, g := range []string{g1, g2} {
			if g != "" {
				c.Groups = append(c.Groups, g)
			}
		}
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("appendJSON = %s\njson.Marshal = %s", got, want)
		}
	})
}
