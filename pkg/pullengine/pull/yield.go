package pull

import "time"

// Yield is whether the engine yields to pulls the runtime makes for
// someone else (the kubelet), since when, and how many blobs being
// written it yields to.
type Yield struct {
	On    bool
	Since time.Time
	Blobs int
}
