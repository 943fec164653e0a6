package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolplane/toolplane/toolkit"
)

// ReportRequest is build_report's input.
type ReportRequest struct {
	Sections int `json:"sections,omitempty" tool:"minimum=1;maximum=20" default:"4" description:"How many sections to write"`
	DelayMs  int `json:"delayMs,omitempty" tool:"minimum=0;maximum=2000" default:"250" description:"How long each section takes, in milliseconds"`
}

// Report is build_report's output.
type Report struct {
	Sections []string `json:"sections"`
	Took     string   `json:"took" description:"How long the report took, for example: 1s"`
}

// buildReport is the build_report tool: a long-running tool that reports
// its progress after every section and logs when it starts, so that an MCP
// client that asks for progress can show a progress bar. It stops when its
// context ends.
func buildReport(ctx context.Context, in ReportRequest) (Report, error) {
	start := time.Now()
	toolkit.Log(ctx, slog.LevelInfo, fmt.Sprintf("writing %d sections", in.Sections))
	out := Report{Sections: []string{}}
	for i := 1; i <= in.Sections; i++ {
		select {
		case <-ctx.Done():
			return Report{}, fmt.Errorf("stopped after %d of %d sections: %w", i-1, in.Sections, ctx.Err())
		case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
		}
		out.Sections = append(out.Sections, fmt.Sprintf("Section %d", i))
		toolkit.Progress(ctx, float64(i), float64(in.Sections), fmt.Sprintf("wrote section %d of %d", i, in.Sections))
	}
	out.Took = time.Since(start).Round(time.Millisecond).String()
	return out, nil
}
