package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// floorCommand is the first argument with which this binary, run again by
// itself, serves one replica of the floor: a bare httputil.ReverseProxy in
// front of the workload's invoke endpoint.
//
// The floor is the same run's baseline for the hop. It is one more HTTP
// server and one more HTTP client per call and nothing else (no MCP, no
// table, no bounds), as two processes placed where the gateway's replicas
// are. What the machine makes any Go proxy pay for a hop (its system
// calls, its wake-ups across CPUs, its scheduler) the floor pays too, so
// ratio_floor says what this machine lets a hop reach at all, and
// rps_gateway/rps_floor what the gateway costs beyond that.
const floorCommand = "floor-proxy"

// serveFloor runs one floor replica until SIGTERM or SIGINT: args are
// --addr (where it listens) and --target (the workload's base URL).
func serveFloor(args []string) error {
	fs := flag.NewFlagSet(floorCommand, flag.ContinueOnError)
	addr := fs.String("addr", "", "Where to listen, host:port.")
	target := fs.String("target", "", "The base URL requests are sent on to, as http://host:port.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	to, err := url.Parse(*target)
	if err != nil || to.Scheme != "http" || to.Host == "" || *addr == "" {
		return fmt.Errorf("--addr and an http:// --target are needed (got %q, %q)", *addr, *target)
	}
	srv := &http.Server{Addr: *addr, Handler: newFloor(to), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newFloor is the floor's handler: a bare reverse proxy to target, set as
// a careful deployment of one would be: an idle pool as large as the
// bench's callers' concurrency can use (its connections per host, 64 at
// most), and pooled copy buffers (the default allocates 32 KiB a call,
// which would flatter the gateway).
func newFloor(target *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite:    func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:  &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
		BufferPool: &bufferPool{},
	}
}

// bufferPool is an httputil.BufferPool of 32 KiB buffers.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
