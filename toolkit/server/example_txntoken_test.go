package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
)

// With Options.TxnToken, a tool learns who called it through the gateway:
// the caller of a token that verifies against the gateway's JWKS. Here a
// test server plays the gateway's JWKS and signs a token as the gateway
// does.
func ExampleOptions_txnToken() {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: "k1", Algorithm: "EdDSA", Use: "sig"}}})
	}))
	defer jwks.Close()

	reg := new(toolkit.Registry)
	whoami := toolkit.MustNew("whoami", "Who is calling", func(ctx context.Context, _ struct{}) (string, error) {
		c, _ := toolkit.CallerFrom(ctx)
		return fmt.Sprintf("%s %v", c.Subject, c.Groups), nil
	})
	if err := reg.Add(whoami); err != nil {
		panic(err)
	}
	h := server.New(reg, &server.Options{TxnToken: &server.TxnTokenOptions{JWKSURL: jwks.URL, Audience: "crm/crm-tools"}})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: priv, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType(server.TxnTokenType))
	sign := func(aud string) string {
		now := time.Now()
		tok, _ := jwt.Signed(signer).Claims(map[string]any{
			"sub": "system:serviceaccount:crm:agent", "groups": []string{"team-crm"}, "aud": aud, "txn": "req-1",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(),
		}).Serialize()
		return tok
	}
	for _, aud := range []string{"crm/crm-tools", "crm/other-tools"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tools/whoami", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.TxnTokenHeader, sign(aud))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		var out struct {
			Content []struct{ Text string }  `json:"content"`
			Error   struct{ Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			fmt.Println(resp.StatusCode, out.Content[0].Text)
		} else {
			fmt.Println(resp.StatusCode, out.Error.Message)
		}
	}
	// Output:
	// 200 system:serviceaccount:crm:agent [team-crm]
	// 401 the Txn-Token header was refused: it is not issued for crm/crm-tools
}
