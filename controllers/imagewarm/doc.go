// Package imagewarm is the ImageWarm status controller: it runs once per
// cluster (leader-elected) and folds the agents' NodeWarm reports into each
// ImageWarm's status. It never pulls and never talks to a runtime; it
// imports neither the agent nor the pull engine.
//
// A reconcile reads, folds, then writes:
//
//   - reconciler.go: the Reconciler, its watches and the one reconcile
//     function that strings the steps together.
//   - handlers.go: which ImageWarms a Node or NodeWarm change enqueues.
//   - read.go: the ImageWarm and the fleet (Nodes' metadata, NodeWarms)
//     from the manager's cache.
//   - tally.go: one ImageWarm's counts, node by node, in memory that does
//     not grow with the fleet.
//   - status.go: the fold itself (counts, failures, Progressing, Degraded).
//   - readiness.go: Ready, minReadyNodes and the nodes that never reported.
//   - rollout.go: the waves (maxPulling, canary) and the bound agents obey.
//   - pace.go: when a status may be written (settled at once, progress
//     spaced by how many watch it).
//   - write.go: the status update and its conflict retry.
//   - echo.go: the last status written, until the cache holds it.
//   - workloads.go: spec.imagesFrom, resolved through package workloads
//     (the pure part: which images a workload's template names).
//   - metrics.go: the controller's Prometheus series.
package imagewarm
