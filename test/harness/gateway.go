package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"time"
)

// Gateway is the gateway binary run in a process of its own.
type Gateway struct {
	// Bin is the gateway binary.
	Bin string
	// Kubeconfig is passed as --kubeconfig.
	Kubeconfig string
	// TableNamespace is passed as --table-namespace.
	TableNamespace string
	// Resolve maps workload Service hosts
	// (name.namespace.svc.cluster.local:port, as the gateway dials them) to
	// the loopback addresses to dial instead, passed as --resolve.
	Resolve map[string]string
	// Args are further flags.
	Args []string
	// Env are further variables of its environment, NAME=value, such as
	// the GOMEMLIMIT that the chart sets.
	Env []string
	// LogPath receives the gateway's output, appended across restarts.
	LogPath string
	// TLS, for a gateway that Args tell to serve HTTPS (--tls-cert-file),
	// is how clients reach it: the roots that trust its certificate, and
	// the ServerName it holds. Nil is plain HTTP.
	TLS *tls.Config

	// Addr, ProbeAddr and MetricsAddr are the loopback addresses of the
	// process that runs now.
	Addr, ProbeAddr, MetricsAddr string

	proc Process
}

// Start starts the gateway and waits until it is ready: until it holds a
// tool table.
func (g *Gateway) Start(ctx context.Context) error {
	if g.proc.Pid() != 0 {
		return errors.New("the gateway is running already")
	}
	for _, a := range []*string{&g.Addr, &g.ProbeAddr, &g.MetricsAddr} {
		if *a != "" {
			continue // chosen by the test, to be named in the gateway's flags
		}
		var err error
		if *a, err = FreeAddr(); err != nil {
			return err
		}
	}
	args := []string{
		"--kubeconfig", g.Kubeconfig,
		"--addr", g.Addr,
		"--health-probe-bind-address", g.ProbeAddr,
		"--metrics-bind-address", g.MetricsAddr,
		// Plain HTTP, for tests that read metrics without a token; a
		// --metrics-secure=true in Args wins over this.
		"--metrics-secure=false",
		"--table-namespace", g.TableNamespace,
	}
	for host, addr := range g.Resolve {
		args = append(args, "--resolve", host+"="+addr)
	}
	g.proc.Name, g.proc.Bin, g.proc.LogPath, g.proc.Env = "the gateway", g.Bin, g.LogPath, g.Env
	g.proc.Args = append(args, g.Args...)
	return g.proc.Start(ctx, "http://"+g.ProbeAddr+"/readyz")
}

// URL is the gateway's base URL: https:// with TLS.
func (g *Gateway) URL() string {
	if g.TLS != nil {
		return "https://" + g.Addr
	}
	return "http://" + g.Addr
}

// Client is an HTTP client for URL: one that verifies the gateway's
// certificate with TLS.
func (g *Gateway) Client() *http.Client {
	if g.TLS == nil {
		return http.DefaultClient
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: g.TLS.Clone()}}
}

// Pid is the process id of the running gateway, or 0.
func (g *Gateway) Pid() int { return g.proc.Pid() }

// Done is closed when the running gateway exits; see [Process.Done].
func (g *Gateway) Done() <-chan struct{} { return g.proc.Done() }

// Exited reports whether the process that Start started has exited, and
// how.
func (g *Gateway) Exited() (bool, error) { return g.proc.Exited() }

// Stop sends SIGTERM and waits up to timeout for the process to exit.
func (g *Gateway) Stop(timeout time.Duration) error { return g.proc.Stop(timeout) }
