package main

import (
	"net/url"
	"strings"
	"testing"
)

// TestServiceProxyURL checks where the service proxy transport sends a
// table endpoint, and that no endpoint a tenant shapes reaches another
// path of the API server.
func TestServiceProxyURL(t *testing.T) {
	server, _ := url.Parse("https://api.example:6443/prefix")
	p := &serviceProxy{server: server}
	for _, tc := range []struct {
		endpoint, want, err string
	}{
		{endpoint: "http://crm-tools.crm.svc:8080/tools/crm_query", want: "https://api.example:6443/prefix/api/v1/namespaces/crm/services/http:crm-tools:8080/proxy/tools/crm_query"},
		{endpoint: "https://crm-tools.crm.svc.cluster.local/mcp?x=1", want: "https://api.example:6443/prefix/api/v1/namespaces/crm/services/https:crm-tools:443/proxy/mcp?x=1"},
		{endpoint: "http://crm-tools.crm.svc/mcp", want: "https://api.example:6443/prefix/api/v1/namespaces/crm/services/http:crm-tools:80/proxy/mcp"},
		{endpoint: "http://crm-tools.crm.svc:8080/../../../../api/v1/namespaces/kube-system/secrets", err: "cannot carry"},
		{endpoint: "http://crm-tools.crm.svc:8080/a/./b", err: "cannot carry"},
		{endpoint: "http://crm-tools.crm.svc:8080/mcp%2F..%2F..%2Fsecrets", err: "cannot carry"},
		{endpoint: "http://crm-tools.crm.svc:8080/mcp\\..\\secrets", err: "cannot carry"},
		{endpoint: "http://10.0.0.1:8080/tools/x", err: "not a Service's address"},
		{endpoint: "http://evil.example/tools/x", err: "not a Service's address"},
		{endpoint: "http://Crm_Tools.crm.svc/tools/x", err: "not a Service's address"},
		{endpoint: "http://user:pw@crm-tools.crm.svc/tools/x", err: "not a Service's address"},
		{endpoint: "ftp://crm-tools.crm.svc/tools/x", err: "not a Service's address"},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			e, err := url.Parse(tc.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.proxyURL(e)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("proxyURL = %v, %v; want an error saying %q", got, err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && got.String() != tc.want:
				t.Fatalf("proxyURL = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestClean checks that a field a server chose cannot write escape
// sequences or lines of its own to the terminal.
func TestClean(t *testing.T) {
	if got := clean("image/png\x1b]0;pwned\x07\nfake line"); got != "image/png?]0;pwned??fake line" {
		t.Fatalf("clean = %q", got)
	}
	if got := clean(strings.Repeat("x", 1000)); len(got) > 260 {
		t.Fatalf("clean kept %d bytes", len(got))
	}
}
