// Package warmerctl is kubectl warmer: a person's view of one ImageWarm
// (status), of why it is not Ready (why) and of one node (node), read
// with the user's kubeconfig and written as text, a live terminal view,
// JSON or YAML. It writes nothing to the cluster.
//
// Files by role:
//   - read.go, follow.go: what is read from the API server (one ImageWarm,
//     the NodeWarms in one paged List; a watch of both for --watch);
//   - summary.go, failures.go: the pure fold of those objects into what a
//     person reads (Summary), slowest node first;
//   - why.go, vocabulary.go: why an ImageWarm is not Ready, in the
//     reasons' documented words (api/v1alpha1's conditions.go, read
//     through internal/vocabulary);
//   - node.go: what one node holds for whom;
//   - render.go, render_why.go, render_node.go, bars.go, live.go: each
//     verb's text (no colour or cursor movement), the bars (bubbles), and
//     the live terminal view of status --watch (bubbletea);
//   - command.go, status.go: the cobra commands and their flags.
package warmerctl
