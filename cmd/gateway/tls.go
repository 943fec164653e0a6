package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// servingCert names the files of the client-facing listener's certificate
// and key (--tls-cert-file, --tls-key-file): a kubernetes.io/tls Secret
// mounted as a volume, in the chart.
type servingCert struct{ certFile, keyFile string }

// check refuses one file without the other: a gateway that was meant to
// serve HTTPS must not start in plain HTTP because a flag was lost.
func (c servingCert) check() error {
	if (c.certFile == "") != (c.keyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together: give both (HTTPS) or neither (plain HTTP)")
	}
	return nil
}

// listener serves TLS on l when the files are given, and l as it is (plain
// HTTP) otherwise. The certificate is read before the first connection
// (a file that is missing or does not parse fails the start) and again
// whenever the files change, and every 10 seconds besides, by
// controller-runtime's certwatcher, as its webhook server does: a mounted
// Secret that cert-manager or an operator rotates is served without a
// restart. A rotation that leaves a bad pair behind keeps the last good
// certificate, and certwatcher logs the error.
//
// HTTP/2 is not offered: connections are what --max-conns and
// --max-conns-per-client bound, and the plain-HTTP listener speaks
// HTTP/1.1 only; HTTP/2 would multiplex many requests over one connection
// past those bounds (and bring Rapid Reset, CVE-2023-44487, with it).
func (c servingCert) listener(ctx context.Context, log *slog.Logger, l net.Listener, auth bool) (net.Listener, error) {
	cfg, err := c.tlsConfig(ctx, log, auth)
	if err != nil || cfg == nil {
		return l, err
	}
	return tls.NewListener(l, cfg), nil
}

// tlsConfig is the client-facing listener's TLS configuration, watching
// the certificate files until ctx ends; nil when there are none (plain
// HTTP), as listener says.
func (c servingCert) tlsConfig(ctx context.Context, log *slog.Logger, auth bool) (*tls.Config, error) {
	if c.certFile == "" {
		if auth {
			log.Warn("Serving plain HTTP with authentication on: bearer tokens cross the network in cleartext; give --tls-cert-file and --tls-key-file")
		}
		return nil, nil
	}
	w, err := certwatcher.New(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the serving certificate (--tls-cert-file, --tls-key-file): %w", err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			log.Error("Stopped watching the serving certificate: a rotation is not picked up until a restart", "error", err)
		}
	}()
	return c.config(w), nil
}

// config is the client-facing listener's TLS configuration, with its
// certificate from w.
func (servingCert) config(w *certwatcher.CertWatcher) *tls.Config {
	return &tls.Config{
		GetCertificate: w.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
	}
}
