package pull

// Class is the stable, machine-readable reason of a pull outcome, worded
// like the kubelet's image pull reasons. It is empty for a successful pull.
type Class string

// Pull outcome classes.
const (
	// ClassInvalidImageName: the reference does not parse; the runtime is
	// never called.
	ClassInvalidImageName Class = "InvalidImageName"
	// ClassRegistryUnavailable: the registry could not be reached, cut
	// the connection or answered with a server error.
	ClassRegistryUnavailable Class = "RegistryUnavailable"
	// ClassRateLimited: the registry answered 429 Too Many Requests. Told
	// apart from RegistryUnavailable because the cure differs: the
	// registry is up, but wants fewer or authenticated pulls.
	ClassRateLimited Class = "RateLimited"
	// ClassUnauthorized: the registry refused the credentials (or their
	// absence).
	ClassUnauthorized Class = "Unauthorized"
	// ClassNotFound: no such repository, tag or digest.
	ClassNotFound Class = "NotFound"
	// ClassNoMatchingPlatform: the image exists, but not for this node's
	// OS and architecture.
	ClassNoMatchingPlatform Class = "NoMatchingPlatform"
	// ClassArtifactsUnsupported: the image is an OCI artifact, and the
	// node's runtime cannot mount artifacts as image volumes. The engine
	// never sets it: the agent does not ask it for such pulls.
	ClassArtifactsUnsupported Class = "ArtifactsUnsupported"
	// ClassSignatureValidationFailed: the runtime's signature policy
	// rejected the image.
	ClassSignatureValidationFailed Class = "SignatureValidationFailed"
	// ClassTimeout: the per-pull timeout (or a runtime deadline) expired.
	ClassTimeout Class = "Timeout"
	// ClassStalled: the pull's bytes stopped moving for longer than the
	// engine's stall timeout (a registry that holds the connection), and
	// the engine cancelled it.
	ClassStalled Class = "Stalled"
	// ClassDiskPressure: the image filesystem is too full to start a pull,
	// or the runtime ran out of space.
	ClassDiskPressure Class = "DiskPressure"
	// ClassCredentialProviderFailed: a credential-provider plugin that
	// matches the image failed (it exited non-zero, timed out, or answered
	// with something that is not a CredentialProviderResponse) and the
	// registry then refused the pull without its credentials.
	ClassCredentialProviderFailed Class = "CredentialProviderFailed"
	// ClassErrImagePull: any other failure.
	ClassErrImagePull Class = "ErrImagePull"
	// ClassCanceled: the pull was no longer wanted. Not a failure of the
	// image: it starts no back-off.
	ClassCanceled Class = "Canceled"
)

// Classes lists every class a failed pull can have, in the order above.
// The API states the same words as NodeWarm image reasons; a test holds
// the two lists equal.
func Classes() []Class {
	return []Class{
		ClassInvalidImageName, ClassRegistryUnavailable, ClassRateLimited,
		ClassUnauthorized, ClassNotFound, ClassNoMatchingPlatform, ClassArtifactsUnsupported,
		ClassSignatureValidationFailed, ClassTimeout, ClassStalled, ClassDiskPressure,
		ClassCredentialProviderFailed, ClassErrImagePull, ClassCanceled,
	}
}
