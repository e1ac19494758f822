package pullengine

import "github.com/warmer-dev/warmer/pkg/pullengine/pull"

// The engine's reports are plain data kept in package pull, so that a
// reader of them (the agent's planner) needs no CRI client; these names
// keep the engine's API whole.

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

// States (see package pull).
const (
	StateQueued  = pull.StateQueued
	StatePulling = pull.StatePulling
	StateBackOff = pull.StateBackOff
	StateFailed  = pull.StateFailed
	StatePulled  = pull.StatePulled
)

// Classes (see package pull).
const (
	ClassInvalidImageName          = pull.ClassInvalidImageName
	ClassRegistryUnavailable       = pull.ClassRegistryUnavailable
	ClassRateLimited               = pull.ClassRateLimited
	ClassUnauthorized              = pull.ClassUnauthorized
	ClassNotFound                  = pull.ClassNotFound
	ClassNoMatchingPlatform        = pull.ClassNoMatchingPlatform
	ClassSignatureValidationFailed = pull.ClassSignatureValidationFailed
	ClassTimeout                   = pull.ClassTimeout
	ClassDiskPressure              = pull.ClassDiskPressure
	ClassCredentialProviderFailed  = pull.ClassCredentialProviderFailed
	ClassErrImagePull              = pull.ClassErrImagePull
	ClassCanceled                  = pull.ClassCanceled
)

// Classes lists every class a failed pull can have (pull.Classes).
func Classes() []Class { return pull.Classes() }
