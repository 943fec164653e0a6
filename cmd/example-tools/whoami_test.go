package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// TestWhoamiNamesTheVerifiedCaller runs example-tools with
// --caller-jwks-url at a gateway's JWKS, and calls whoami with tokens the
// gateway's own minter signs: the caller it names comes back; a token for
// another ToolSet is refused.
func TestWhoamiNamesTheVerifiedCaller(t *testing.T) {
	dir := t.TempDir()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, gateway.CurrentKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	tt, err := gateway.NewTxnTokens(gateway.TxnTokenOptions{KeyDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.New(&gateway.Options{TxnTokens: tt})
	gw := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		gw.Close()
	})

	in := start(t, "--caller-jwks-url", gw.URL+gateway.JWKSPath, "--caller-audience", "crm/example-tools")
	caller := &gateway.Caller{User: "system:serviceaccount:crm:agent", Groups: []string{"system:serviceaccounts", "system:authenticated"}, AuthMode: "kubernetes"}
	call := func(aud string) (int, string) {
		tok, err := tt.Mint(caller, &spec.TableTool{Name: "crm_whoami", SourceName: "whoami", ToolSet: spec.ObjectReference{Namespace: "crm", Name: aud}}, "req-7", "", "toolplane-gateway")
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, in.url+spec.InvokePrefix+"whoami", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.TxnTokenHeader, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := call("example-tools")
	var res struct {
		StructuredContent Identity `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(body), &res); status != http.StatusOK || err != nil {
		t.Fatalf("whoami = %d %s", status, body)
	}
	if got := res.StructuredContent; got.Subject != caller.User || strings.Join(got.Groups, ",") != strings.Join(caller.Groups, ",") || got.RequestID != "req-7" {
		t.Errorf("whoami = %+v, want %s %v req-7", got, caller.User, caller.Groups)
	}
	if status, body := call("other-tools"); status != http.StatusUnauthorized {
		t.Errorf("a token for another ToolSet: %d %s, want 401", status, body)
	}
}
