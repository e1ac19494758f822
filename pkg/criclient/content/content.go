// Package content holds what containerd's content store shows of the
// blobs pulls write, as plain data: criclient reads it, the pull engine
// follows pulls by it, and neither needs the other for that.
package content

import "time"

// Ingest is one blob being written into the content store.
type Ingest struct {
	// Ref is the ingest's name in the store (containerd's pulls name it
	// "layer-sha256:..." and so on).
	Ref string
	// Digest is the blob's expected digest ("sha256:..."); empty when the
	// writer did not say.
	Digest string
	// Offset is how many bytes are written; Total how many are expected
	// (0 when unknown).
	Offset, Total int64
	// UpdatedAt is when bytes were last written.
	UpdatedAt time.Time
}

// Blob is one blob the content store holds in full. containerd 1.6 lists
// blobs without their times; Blob reads them.
type Blob struct {
	Digest string
	Size   int64
	// CreatedAt is when the blob was committed (its last byte written);
	// UpdatedAt when its labels last changed.
	CreatedAt, UpdatedAt time.Time
	Labels               map[string]string
}
