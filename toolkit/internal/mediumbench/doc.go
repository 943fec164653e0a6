// Package mediumbench simulates the candidate media for the tool table past
// the ConfigMap table's ceiling, over a synthetic 100,000-tool cluster held
// in memory: see docs/table-medium.md. It has benchmarks only:
//
//	cd toolkit && go test ./internal/mediumbench -run '^$' -bench . -benchtime=1x
package mediumbench
