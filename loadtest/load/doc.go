// Package load is the project's load generator as a library: named scenarios (an API read/write
// mix across many workspaces, mutation jobs end to end, validations and screenshots) sent
// through the router of a running deployment with vegeta's attacker, and what comes out of a
// run: per-operation summaries (count, errors by code, exact p50/p95/p99, throughput), a JSON
// report with a per-second timeline, a self-contained HTML plot of latency over time (vegeta's
// plot, uPlot inlined) and the release gate's comparison against a stored baseline.
//
// Commands: loadtest/loadgen (make load, make gate, make gate-baseline) and loadtest/scalebench
// (the scale evidence of BENCHMARKS.md). Targets are loopback addresses only (CheckLoopback);
// every run is bounded in time and in requests and stops by itself.
package load
