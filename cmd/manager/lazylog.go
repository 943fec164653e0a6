package main

import (
	"slices"

	"github.com/go-logr/logr"
)

// lazyValues wraps the manager's logger so that WithValues only keeps its
// key-value pairs, and hands them to the logger underneath when a line is
// written. controller-runtime gives every reconcile a logger with the
// controller, the object and a reconcile ID, and zap encodes such values
// the moment they are added: with 1,000 ToolSets that scrape every 30s
// and log nothing at the default level, that encoding alone was 6% of the
// manager's CPU at steady state (BenchmarkLazyValues). A line written
// costs the encoding it would have, once. Values are encoded when a line
// is written, not when they are added: give WithValues values, not
// pointers to what may change in between.
func lazyValues(l logr.Logger) logr.Logger {
	base := l.GetSink()
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		// One frame more than the sink underneath: this one.
		base = cd.WithCallDepth(1)
	}
	return logr.New(&lazySink{base: base})
}

type lazySink struct {
	base logr.LogSink
	// kv are the values added since base, which never holds them.
	kv []any
}

var (
	_ logr.LogSink          = (*lazySink)(nil)
	_ logr.CallDepthLogSink = (*lazySink)(nil)
)

// Init does nothing: the sink underneath was initialized by its own
// logger, and lazyValues gave it this sink's frame.
func (s *lazySink) Init(logr.RuntimeInfo) {}

func (s *lazySink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *lazySink) Info(level int, msg string, kv ...any) {
	s.sink().Info(level, msg, kv...)
}

func (s *lazySink) Error(err error, msg string, kv ...any) {
	s.sink().Error(err, msg, kv...)
}

// sink is base with the values kept.
func (s *lazySink) sink() logr.LogSink {
	if len(s.kv) == 0 {
		return s.base
	}
	return s.base.WithValues(s.kv...)
}

func (s *lazySink) WithValues(kv ...any) logr.LogSink {
	return &lazySink{base: s.base, kv: append(slices.Clip(s.kv), kv...)}
}

func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{base: s.base.WithName(name), kv: s.kv}
}

func (s *lazySink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.base.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &lazySink{base: cd.WithCallDepth(depth), kv: s.kv}
}
