package pull

import "time"

// Progress is how far a pull under way has come, in compressed bytes, as
// the runtime's content store shows it: the blobs (config and layers) of
// the image's manifest, those the store holds already counting in full.
type Progress struct {
	// Known is set once the pull's manifest was found and read: Total and
	// Done count from then on.
	Known bool
	// Done and Total are bytes fetched and to fetch.
	Done, Total int64
	// Rate is bytes a second, smoothed over the last few readings; 0 until
	// two readings apart.
	Rate float64
	// MovedAt is when Done last grew; the pull's start until it first
	// does.
	MovedAt time.Time
	// Fetched is what came over the wire for this pull so far: blobs
	// committed since it started, and what is written of the others.
	Fetched int64
	// Phase is Downloading until every blob is in, then Unpacking.
	Phase Phase
	// UnpackSeen says the runtime shows its unpacking (containerd's
	// snapshots); the fields below count only then.
	UnpackSeen bool
	// Layers is how many layers the image has, LayersUnpacked how many
	// are unpacked, and Unpacked the bytes they and the layers being
	// unpacked take so far.
	Layers, LayersUnpacked int
	Unpacked               int64
	// UnpackRate is Unpacked's growth in bytes a second: while it
	// downloads, smoothed over the last few readings; once every blob is
	// in, averaged over the time since (the unpack then has the disk and
	// cores to itself, and runs faster), with the node's NodeUnpackRate
	// weighed in. 0 until read twice.
	UnpackRate float64
	// NodeUnpackRate is how fast this node unpacked, in bytes a second,
	// once a pull's download had ended, learned from its earlier pulls;
	// 0 until one unpacked for long enough to tell.
	NodeUnpackRate float64
	// UnpackMovedAt is when Unpacked or LayersUnpacked last grew; when
	// all bytes were in until it first does.
	UnpackMovedAt time.Time
}

// Phase is what a pull under way is doing.
type Phase string

// Phases of a pull.
const (
	// PhaseDownloading: blobs are still being fetched (layers may
	// unpack meanwhile).
	PhaseDownloading Phase = "Downloading"
	// PhaseUnpacking: every blob is in; the runtime unpacks the layers.
	PhaseUnpacking Phase = "Unpacking"
)

// FetchedAtEnd is what a pull fetched in all, by its last reading: one
// that succeeded also fetched what was still missing then.
func (p Progress) FetchedAtEnd(succeeded bool) int64 {
	if succeeded && p.Known {
		return p.Fetched + max(p.Total-p.Done, 0)
	}
	return p.Fetched
}

// Left estimates the time the pull still needs at its current rates;
// false when there is no rate to go by.
//
// The download and the unpack overlap (layers unpack while others
// download), so the pull ends when the slower of the two does: while it
// downloads, that is the bytes left at the download rate, and then, where
// the unpacking is seen, what the unpack will not have done by then (at
// its present rate) at the rate the node unpacks with the download ended.
// That rate is the node's, learned from its earlier pulls, or the pull's
// own unpack rate when faster; until the node has learned one, at least
// the download's rate.
// Adding the unpack at the rate read while downloading to the download's
// time instead, a 2 GB pull on two cores was said to need several times
// the time it took: the unpack ran at a third of its speed beside the
// download.
//
// The unpack estimate takes the layers' unpacked size to be their
// compressed size, since nothing tells the unpacked size before the
// unpacking: an image that compresses well unpacks longer than it says.
// While it unpacks with no unpack rate yet, or past the estimate, there
// is nothing to go by.
func (p Progress) Left() (time.Duration, bool) {
	if !p.Known || p.Done > p.Total {
		return 0, false
	}
	var secs float64
	switch {
	case p.Done < p.Total:
		if p.Rate <= 0 {
			return 0, false
		}
		secs = float64(p.Total-p.Done) / p.Rate
		if p.UnpackSeen {
			secs += p.unpackAfter(secs)
		}
	case p.UnpackSeen && p.Unpacked >= p.Total:
		return 0, false
	case p.UnpackSeen:
		rate := p.UnpackRate
		if rate <= 0 {
			rate = p.NodeUnpackRate
		}
		if rate <= 0 {
			return 0, false
		}
		secs = float64(p.Total-p.Unpacked) / rate
	}
	// At most ten thousand days: a crawling pull of a huge image must not
	// overflow time.Duration into a negative time left.
	secs = min(secs, maxLeft.Seconds())
	return time.Duration(secs * float64(time.Second)), true
}

// unpackAfter is how long the unpack goes on once the download ends, in
// download seconds from now: what it will not have done by then at its
// present rate, at the node's rate with nothing downloading. The node
// unpacks alone at least as fast as this pull unpacks beside its
// download: a learned rate below that was learned under a load that has
// since gone (a first, cold pull; a neighbour's), and the pull's own
// rate is the better floor. With no rate learned, the unpack alone is
// taken to be at least as fast as the download: a node whose unpack
// ends too soon after the download to be measured (containerd 2 on a
// quiet node) never learns one, and its unpack beside the download is
// seen a layer at a time, far below what it runs at.
func (p Progress) unpackAfter(download float64) float64 {
	after := max(p.NodeUnpackRate, p.UnpackRate)
	if p.NodeUnpackRate <= 0 {
		after = max(after, p.Rate)
	}
	rest := float64(max(p.Total-p.Unpacked, 0)) - p.UnpackRate*download
	return max(rest, 0) / after
}

// maxLeft bounds Left.
const maxLeft = 10_000 * 24 * time.Hour
