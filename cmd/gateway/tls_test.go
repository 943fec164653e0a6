package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	certutil "k8s.io/client-go/util/cert"
	certmetrics "sigs.k8s.io/controller-runtime/pkg/certwatcher/metrics"
)

// writePair writes a fresh certificate for host, signed by a CA of its
// own, and its key, as a Secret volume's rotation does: each file is
// written aside and renamed over the old one. It returns the pool that
// trusts the new CA only.
func writePair(t *testing.T, dir, host string) *x509.CertPool {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The file holds the serving certificate, then its CA's.
	var ca *pem.Block
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		ca = b
	}
	caCert, err := x509.ParseCertificate(ca.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}

// get GETs / from addr over HTTPS, trusting roots only, and names the
// server certificate's subject.
func get(ctx context.Context, addr, serverName string, roots *x509.CertPool, maxVersion uint16) (string, error) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: serverName, MaxVersion: maxVersion}, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	cn, _, _ := strings.Cut(resp.TLS.PeerCertificates[0].Subject.CommonName, "@") // host@timestamp
	return cn, nil
}

func TestListenerServesTLSAndPicksUpARotatedCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	first := writePair(t, dir, "first.gateway.test")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert := servingCert{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	tl, err := cert.listener(ctx, slog.New(slog.DiscardHandler), l, true)
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.Serve(tl) }()
	defer s.Close()
	addr := l.Addr().String()

	cn, err := get(ctx, addr, "first.gateway.test", first, 0)
	if err != nil || cn != "first.gateway.test" {
		t.Fatalf("HTTPS with the first certificate: %q, %v", cn, err)
	}
	if _, err := get(ctx, addr, "first.gateway.test", first, tls.VersionTLS11); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	resp, err := http.Get("http://" + addr + "/")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served on the TLS listener")
		}
	}

	// The rotation is picked up without a restart: by the file watch at
	// once, or by the poll within 10 seconds.
	second := writePair(t, dir, "second.gateway.test")
	for {
		cn, err := get(ctx, addr, "second.gateway.test", second, 0)
		if err == nil && cn == "second.gateway.test" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the rotated certificate was never served: %q, %v", cn, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := get(ctx, addr, "first.gateway.test", first, 0); err == nil {
		t.Error("the first certificate is still served after the rotation")
	}

	// A rotation that leaves a bad pair behind keeps the last good one:
	// once the watcher has tried to read it (and failed), the second
	// certificate is still served.
	failed := testutil.ToFloat64(certmetrics.ReadCertificateErrors)
	if err := os.WriteFile(cert.keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for testutil.ToFloat64(certmetrics.ReadCertificateErrors) == failed {
		select {
		case <-ctx.Done():
			t.Fatal("the watcher never read the bad key")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if cn, err := get(ctx, addr, "second.gateway.test", second, 0); err != nil || cn != "second.gateway.test" {
		t.Fatalf("after a bad rotation: %q, %v", cn, err)
	}
}

func TestListenerRefusesAMissingCertificate(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	_, err = servingCert{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}.listener(context.Background(), slog.New(slog.DiscardHandler), l, true)
	if err == nil {
		t.Fatal("a gateway without its certificate would serve")
	}
}

func TestServingCertNeedsBothFiles(t *testing.T) {
	for _, c := range []servingCert{{certFile: "tls.crt"}, {keyFile: "tls.key"}} {
		if c.check() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	for _, c := range []servingCert{{}, {certFile: "tls.crt", keyFile: "tls.key"}} {
		if err := c.check(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestListenerWarnsOfCleartextTokens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out bytes.Buffer
	got, err := servingCert{}.listener(context.Background(), slog.New(slog.NewTextHandler(&out, nil)), l, true)
	if err != nil || got != l {
		t.Fatalf("plain HTTP: %v, %v", got, err)
	}
	if !strings.Contains(out.String(), "cleartext") {
		t.Errorf("no warning with auth on: %q", out.String())
	}
	out.Reset()
	if _, err := (servingCert{}).listener(context.Background(), slog.New(slog.NewTextHandler(&out, nil)), l, false); err != nil || out.Len() != 0 {
		t.Errorf("without auth: %v, %q", err, out.String())
	}
}
