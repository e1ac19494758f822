package pull

// PresentImage is what the runtime holds for a wanted reference.
type PresentImage struct {
	// ID is the runtime's image ID (the config digest on containerd).
	ID string
	// RepoDigest is "name@sha256:..." for the looked-up repository, the
	// manifest (or index) digest, or "" if the runtime reports none.
	RepoDigest string
	// Size is the size the runtime reports, in bytes.
	Size uint64
	// Pinned is set when the runtime exempts the image from garbage
	// collection.
	Pinned bool
}
