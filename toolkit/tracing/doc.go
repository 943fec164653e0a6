// Package tracing provides toolkit middleware that records an OpenTelemetry
// span for every tool call, parented to the span in the call's context (the
// incoming HTTP or MCP request's, when the transport is instrumented).
//
// It lives in a package of its own so that a service that does not trace
// does not depend on OpenTelemetry.
package tracing
