package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
)

// The ways call reaches a tool's endpoint without --gateway.
const (
	viaAuto      = "auto"
	viaDirect    = "direct"
	viaAPIServer = "api-server"
)

// inCluster reports whether the plugin runs in a Pod, where the table's
// endpoints (<service>.<namespace>.svc) resolve: as client-go's in-cluster
// configuration tells, by the variables the kubelet sets.
func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// serviceProxyClient is an HTTP client that sends each request for
// http(s)://<service>.<namespace>.svc[.<domain>]:<port>/<path> to the API
// server's service proxy instead,
// /api/v1/namespaces/<namespace>/services/<scheme>:<service>:<port>/proxy/<path>,
// with the kubeconfig's credentials: what `kubectl get --raw` would send, and
// what RBAC allows as the services/proxy subresource in that namespace. The
// discovery client has checked the host already (a Service of the tool's own
// namespace); the transport checks again, and refuses anything else rather
// than send it to the API server.
func serviceProxyClient(cfg *rest.Config) (*http.Client, error) {
	base, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	server, err := url.Parse(cfg.Host)
	if err != nil || cfg.Host == "" {
		return nil, fmt.Errorf("the kubeconfig's server %q is not a URL", cfg.Host)
	}
	if server.Scheme == "" {
		// client-go's default for a bare host:port.
		if server, err = url.Parse("https://" + cfg.Host); err != nil {
			return nil, err
		}
	}
	return &http.Client{Transport: &serviceProxy{base: base, server: server}}, nil
}

type serviceProxy struct {
	base   http.RoundTripper
	server *url.URL
}

func (p *serviceProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	u, err := p.proxyURL(req.URL)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	out.URL = u
	out.Host = ""
	return p.base.RoundTrip(out)
}

// proxyURL is where the service proxy serves endpoint.
func (p *serviceProxy) proxyURL(endpoint *url.URL) (*url.URL, error) {
	host, port := strings.ToLower(endpoint.Hostname()), endpoint.Port()
	labels := strings.Split(host, ".")
	if len(labels) < 3 || labels[2] != "svc" || !dnsLabel(labels[0]) || !dnsLabel(labels[1]) || endpoint.User != nil ||
		endpoint.Scheme != "http" && endpoint.Scheme != "https" {
		return nil, fmt.Errorf("%s is not a Service's address (<service>.<namespace>.svc): the API server cannot proxy it", endpoint.Redacted())
	}
	// The path comes from the table, and a ToolSet's spec.path is its
	// tenant's: a dot segment or an encoded slash would climb out of
	// .../proxy/ into the API server's own paths, with the caller's
	// credentials.
	if endpoint.RawPath != "" || strings.Contains(endpoint.Path, "\\") || slices.ContainsFunc(strings.Split(endpoint.Path, "/"), func(seg string) bool {
		return seg == "." || seg == ".."
	}) {
		return nil, fmt.Errorf("the endpoint %s has a path the API server's service proxy cannot carry as it is", endpoint.Redacted())
	}
	if port == "" {
		port = "80"
		if endpoint.Scheme == "https" {
			port = "443"
		}
	}
	svc, ns := labels[0], labels[1]
	u := *p.server
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/namespaces/" + ns + "/services/" + endpoint.Scheme + ":" + svc + ":" + port + "/proxy" + endpoint.Path
	u.RawPath = ""
	u.RawQuery = endpoint.RawQuery
	return &u, nil
}

// dnsLabel says whether s is one DNS label, as Service and namespace names
// are.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
