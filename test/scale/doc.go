// Package scale runs many simulated warmer agents in one process, for the
// fleet benchmark in test/perf. Each simulated agent is the real agent
// code (agent.NodeAgent, the pull engine, its own controller-runtime
// manager, cache, client and event recorder, under its own node name)
// against a real API server; only the container runtime is a fake
// (FakeRuntime), because a thousand containerds cannot run on one
// machine.
package scale
