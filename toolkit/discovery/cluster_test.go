package discovery_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"time"
)

// clusterHTTP is an agent's HTTP client in a make-believe cluster whose
// every Service is the loopback server srv: the table names Services by
// their cluster DNS names, as the operator publishes them, and the dialer
// stands in for cluster DNS. Whatever host a request names, it reaches srv
// only, so that a test sees what a call would have sent where.
func clusterHTTP(srv *httptest.Server) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	return &http.Client{Transport: tr}
}
