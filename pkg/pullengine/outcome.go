package pullengine

import "github.com/warmer-dev/warmer/pkg/pullengine/pull"

// The engine's reports are plain data kept in package pull, so that a
// reader of them (the agent's planner) needs no CRI client. The types are
// named here too, so the engine's API reads whole; the classes and states
// are pull's constants, named once, there.

// Result is the outcome of one pull job (pull.Result).
type Result = pull.Result

// Status is the engine's view of one image (pull.Status).
type Status = pull.Status

// State is where an image stands in the engine (pull.State).
type State = pull.State

// Class is the reason of a failed pull (pull.Class).
type Class = pull.Class

// DiskUsage is the image filesystem's fill level (pull.DiskUsage).
type DiskUsage = pull.DiskUsage

// PresentImage is what the runtime holds for a reference
// (pull.PresentImage).
type PresentImage = pull.PresentImage

// MaxMessageBytes bounds Result.Message (pull.MaxMessageBytes).
const MaxMessageBytes = pull.MaxMessageBytes

// Classes lists every class a failed pull can have (pull.Classes).
func Classes() []Class { return pull.Classes() }
