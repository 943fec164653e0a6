// Package metrics provides toolkit middleware that counts and times tool
// calls as Prometheus metrics:
//
//   - toolkit_tool_calls_total{tool,outcome}, a counter;
//   - toolkit_tool_call_duration_seconds{tool}, a histogram.
//
// The outcome label takes the values of [toolkit.Outcome]. It lives in a
// package of its own so that a service without Prometheus does not depend
// on its client.
package metrics
