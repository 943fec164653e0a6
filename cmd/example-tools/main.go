// Command example-tools is toolplane's sample workload: a Go service that
// declares tools with toolkit and serves them over the spec endpoint, plain
// HTTP invoke and MCP, ready for a ToolSet to scrape.
//
//	example-tools --addr :8080 --only get_weather,add --name weather-tools
//
// With --stdio it serves the same tools over MCP's stdio transport
// instead, for a desktop client that starts it as a subprocess: a go-sdk
// server of its own, with the tools added by server.AddTools.
//
// It logs JSON to stderr and shuts down gracefully on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/server"
)

// shutdownTimeout bounds the wait for calls in flight at shutdown; it stays
// under Kubernetes' default grace period of 30 seconds.
const shutdownTimeout = 20 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "example-tools:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then shuts down gracefully. Logs go to
// logOut; ready, if not nil, is told the address once it is listening.
func run(ctx context.Context, args []string, logOut io.Writer, ready func(net.Addr)) error {
	fs := flag.NewFlagSet("example-tools", flag.ContinueOnError)
	fs.SetOutput(logOut)
	addr := fs.String("addr", ":8080", "address to listen on")
	only := fs.String("only", "", "serve only these tools, comma-separated (default all)")
	name := fs.String("name", "example-tools", "server name, in the spec document and MCP's serverInfo")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin and stdout instead of HTTP; logs go to stderr")
	anyHost := fs.Bool("allow-any-host-on-loopback", false,
		"accept any Host header on a loopback address (for a proxy on the same machine that forwards a Service's name); off, a foreign Host there is refused as DNS rebinding")
	jwksURL := fs.String("caller-jwks-url", "",
		"verify the transaction token (Txn-Token) of each call against the JWKS at this URL, the gateway's /.well-known/jwks.json, and give the tools the caller it names; needs --caller-audience")
	audience := fs.String("caller-audience", "",
		"with --caller-jwks-url, the audience a transaction token must carry: this workload's ToolSet, as NAMESPACE/NAME")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (*jwksURL == "") != (*audience == "") {
		return errors.New("--caller-jwks-url and --caller-audience go together")
	}
	var txn *server.TxnTokenOptions
	if *jwksURL != "" {
		if ns, n, ok := strings.Cut(*audience, "/"); !ok || ns == "" || n == "" || strings.Contains(n, "/") {
			return fmt.Errorf("--caller-audience must be NAMESPACE/NAME, not %q", *audience)
		}
		txn = &server.TxnTokenOptions{JWKSURL: *jwksURL, Audience: *audience}
	}

	logger := slog.New(slog.NewJSONHandler(logOut, nil))
	reg := &toolkit.Registry{Logger: logger}
	reg.Use(toolkit.Logging(logger))
	all, err := exampleTools(reg, &Helpdesk{})
	if err != nil {
		return fmt.Errorf("declaring tools: %w", err)
	}
	tools, err := selectTools(all, *only)
	if err != nil {
		return err
	}
	if err := reg.Add(tools...); err != nil {
		return fmt.Errorf("registering tools: %w", err)
	}

	if *stdio {
		return serveStdio(ctx, reg, *name, logger)
	}

	h, err := server.NewHandler(reg, &server.Options{Name: *name, Version: version(), Logger: logger, AllowAnyHostOnLoopback: *anyHost, TxnToken: txn})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// No write timeout: MCP streams stay open for as long as a client
		// listens. Close ends them at shutdown.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { h.Close() })

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	logger.Info("Serving tools", "addr", ln.Addr().String(), "name", *name, "tools", len(tools), "revision", reg.Revision(),
		"callerJWKS", *jwksURL, "callerAudience", *audience)
	if ready != nil {
		ready(ln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("Shutting down", "timeout", shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("Stopped")
	return nil
}

// stdioTransport is the transport of --stdio; tests replace it.
var stdioTransport = func() mcp.Transport { return &mcp.StdioTransport{} }

// serveStdio serves reg's tools over MCP on stdin and stdout until ctx is
// done or the client hangs up, from a go-sdk server that could as well
// carry prompts and resources of its own: toolkit only adds the tools.
func serveStdio(ctx context.Context, reg *toolkit.Registry, name string, logger *slog.Logger) error {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: version()}, &mcp.ServerOptions{Logger: logger})
	tools, err := server.AddTools(s, reg, &server.ToolsOptions{Logger: logger})
	if err != nil {
		return err
	}
	defer tools.Close()
	logger.Info("Serving tools over stdio", "name", name, "tools", len(reg.Tools()), "revision", reg.Revision())
	if err := s.Run(ctx, stdioTransport()); err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		return err
	}
	return nil
}
