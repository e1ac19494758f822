// Package controllers holds warmer's controllers, one package each,
// sharing only the API types (api/v1alpha1) and small helpers under pkg/
// and internal/:
//
//   - agent: the node agent, one per node, which compares what the
//     ImageWarms want on its node with what the runtime holds, pulls what
//     is missing and reports it in the node's NodeWarm.
//   - imagewarm: the ImageWarm status controller, one per cluster, which
//     folds the NodeWarms into each ImageWarm's status.
//   - pullsecrets and gate: beside it in the controller binary, the
//     credential bundler and the warm gate (which releases the Pods that
//     wait for their images).
//
// cmd/warmer is the only importer of them.
package controllers
