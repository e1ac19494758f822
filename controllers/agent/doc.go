// Package agent is the node agent's controller: one per node, it keeps the
// images that the ImageWarms selecting its node ask for present there, and
// reports them in the node's NodeWarm. It is the shell around package
// plan: each pass gathers the inputs (the Node, the ImageWarms from the
// cache, the runtime's images through the pull engine, the inbox of pull
// reports), lets plan.Decide decide, and applies the plan (the engine's
// pulls with their secrets, pins, the startup taint, events, the NodeWarm
// status). It makes no decision of its own beyond when to retry a call
// that failed.
//
// Files:
//   - controller.go: NodeAgent, its watches, Reconcile (gather, decide,
//     apply) and what a pass carries to the next (carried).
//   - inbox.go: the engine's reports of started and finished pulls,
//     queued for the next pass.
//   - nodewarm.go: reading, creating and writing the NodeWarm.
//   - secrets.go: the pull secrets' keyrings, read by GET for a pass.
//   - pinshell.go: the runtime's pins read and changed (Pinner).
//   - startuptaint_patch.go: the startup taint read and removed.
//   - record.go: events sent through the recorder.
//   - cache.go: the cache and client options the agent's manager needs.
//   - queue.go, metrics.go: the work queue and the Prometheus series.
package agent
