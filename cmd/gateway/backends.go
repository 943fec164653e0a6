package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/gateway"
)

// The flags of backend credentials, apart from run's parameters.
var (
	backendCredentials = flag.String("backend-credentials", "none",
		`How the gateway learns the credentials of the ToolSets it calls: "none" (every workload is called with no token and the system roots) or "kubernetes" `+
			"(each ToolSet's spec.authorization token and spec.tls CA, read by name from its own namespace: needs get on toolsets, and on secrets and configmaps where ToolSets need credentials).")
	backendCredentialsQPS = flag.Float64("backend-credentials-qps", 20,
		"With --backend-credentials=kubernetes, the most reads per second of ToolSets, Secrets and ConfigMaps sent to the API server; each ToolSet is read once per --backend-credentials-ttl at most.")
)

// newCredentials returns the gateway's source of backend credentials for
// mode, reading through a client of its own, uncached and rate limited,
// so that the gateway caches no Secret beyond one ToolSet's TTL and needs
// neither list nor watch on them.
func newCredentials(cfg *rest.Config, mode string) (gateway.Credentials, error) {
	switch mode {
	case "none":
		return nil, nil
	case "kubernetes":
	default:
		return nil, fmt.Errorf(`--backend-credentials must be "none" or "kubernetes", not %q`, mode)
	}
	if *backendCredentialsQPS <= 0 {
		return nil, errors.New("--backend-credentials-qps must be positive")
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = float32(*backendCredentialsQPS), max(1, int(2**backendCredentialsQPS)), nil
	reader, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the credentials client: %w", err)
	}
	return &gateway.KubernetesCredentials{Reader: reader}, nil
}

// setupTracing exports the gateway's spans over OTLP (gRPC) when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set, configured by the standard OTEL_* variables (OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER, …). Without either, spans are not recorded; trace
// context still passes from callers to workloads, and the provider
// returned is the no-op one, with which the gateway builds no spans at all.
func setupTracing(ctx context.Context, log *slog.Logger) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	otel.SetTracerProvider(sdk)
	log.Info("Exporting spans over OTLP")
	return sdk, sdk.Shutdown, nil
}
