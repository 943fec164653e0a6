package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// refusedMetric counts what a gateway refused at one of its bounds (a
// connection, a request, a stream), by reason.
const refusedMetric = "toolplane_gateway_refused_total"

// refusals returns the refusals the gateway whose plain-HTTP metrics
// listen at metricsAddr has counted so far, by reason, so that a run can
// say which bound refused its clients: a refused call already fails the
// run, and this says why.
func refusals(ctx context.Context, metricsAddr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// toolplane_gateway_refused_total{reason="connections_per_client"} 25
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, refusedMetric+`{reason="`)
		if !ok {
			continue
		}
		reason, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		out[reason] = v
	}
	return out, sc.Err()
}

// formatRefusals writes refusals as reason=count, in a stable order.
func formatRefusals(r map[string]float64) string {
	var b strings.Builder
	for _, k := range sortedKeys(r) {
		if r[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, " %s=%.0f", k, r[k])
	}
	if b.Len() == 0 {
		return " none"
	}
	return b.String()
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// startProfiles takes a CPU profile of du from the net/http/pprof of each
// of addrs into dir as gateway-N.cpu.pprof, and returns a function that
// waits for them. With dir empty it takes none.
func startProfiles(ctx context.Context, dir string, addrs []string, du time.Duration) (wait func() error) {
	if dir == "" {
		return func() error { return nil }
	}
	errs := make(chan error, len(addrs))
	for i, a := range addrs {
		go func() {
			errs <- profile(ctx, a, du, filepath.Join(dir, fmt.Sprintf("gateway-%d.cpu.pprof", i)))
		}()
	}
	return func() error {
		var all []error
		for range addrs {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}

func profile(ctx context.Context, addr string, du time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, du+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(1, int(du.Seconds())))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling %s: status %d", addr, resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		step("CPU profile written to %s", path)
	}
	return err
}
