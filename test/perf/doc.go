// Package perf holds warmer's end-to-end benchmarks: time to warm one node
// through the real agent binary against raw CRI pulls, the agent's idle
// footprint, and a fleet of simulated agents against the real API server
// and controller. They run on the test bed (make testbed) and are
// benchmarks, not timed tests: each reports its figures as benchmark
// metrics, which benchtable gathers into one table (make bench).
// docs/performance.md describes them and holds the results.
package perf
