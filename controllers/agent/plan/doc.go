// Package plan is every decision the node agent makes, as pure functions:
// given what the shell gathered in one pass (the ImageWarms that select the
// node, the runtime's images, the engine's view, the pulls that started and
// finished since the last pass, the time), Decide says what to pull, what
// to pin and unpin, which events to record on which ImageWarms, whether to
// let the startup taint go, the NodeWarm status to report and when the
// next pass is due. The shell (package agent) reads and writes the world;
// this package never does: it imports no API client, no clock and no
// container runtime, so the compiler keeps it pure and a table of inputs
// tells what the agent does on each.
//
// What the shell learns only while applying a plan comes back to it
// (Output.Applied for secrets and pins, Output.TaintNotRemoved for the
// taint), and the planner, not the shell, decides what it means. What a
// pass leaves for the next is State; the write pacing's memory is Report.
//
// Files:
//   - planner.go: Input, Output, State and Decide, a pass over the images.
//   - desired.go: the desired set, the ImageWarms' wishes merged per image
//     (Memo keeps parsed ImageWarms between passes).
//   - status.go: the NodeWarm status's pieces and conditions; RuntimeDown.
//   - events.go: one constructor per event reason.
//   - artifacts.go: OCI artifacts (spec.artifacts), pulled only where
//     the runtime can mount them.
//   - pins.go: what to pin and unpin, and the Pinning condition.
//   - startuptaint.go: when the startup taint goes, and its condition.
//   - applied.go: outcomes of applying a plan folded back into it.
//   - report.go: when the NodeWarm status is written (internal/pace's rule).
package plan
