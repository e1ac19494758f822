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
	// UnpackRate is Unpacked's growth in bytes a second, smoothed; 0
	// until it grew between two readings.
	UnpackRate float64
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

// Left estimates the time the pull still needs at its current rate;
// false when there is no rate to go by.
//
// While it downloads, that is the bytes left at the download rate, plus,
// where the unpacking is seen, the layers left at the unpack rate. The
// unpack estimate takes the layers' unpacked size to be their compressed
// size, since nothing tells the unpacked size before the unpacking: an
// image that compresses well unpacks longer than it says. Where the
// unpacking is seen but no layer has unpacked yet, the unpack is taken to
// run at the download's rate: left out, the download's time alone was
// short of the pull's by all of the unpack (on a 2 GB image, 0.2 s said
// where the pull took eight more). While it unpacks with no unpack rate
// yet, or past the estimate, there is nothing to go by.
func (p Progress) Left() (time.Duration, bool) {
	if !p.Known || p.Done > p.Total {
		return 0, false
	}
	var secs float64
	unpackRate := p.UnpackRate
	if p.Done < p.Total {
		if p.Rate <= 0 {
			return 0, false
		}
		secs = float64(p.Total-p.Done) / p.Rate
		if unpackRate <= 0 {
			unpackRate = p.Rate
		}
	}
	if p.UnpackSeen && unpackRate > 0 {
		secs += float64(max(p.Total-p.Unpacked, 0)) / unpackRate
	} else if p.UnpackSeen {
		return 0, false
	}
	if p.Phase == PhaseUnpacking && p.Unpacked >= p.Total {
		return 0, false
	}
	// At most ten thousand days: a crawling pull of a huge image must not
	// overflow time.Duration into a negative time left.
	secs = min(secs, maxLeft.Seconds())
	return time.Duration(secs * float64(time.Second)), true
}

// maxLeft bounds Left.
const maxLeft = 10_000 * 24 * time.Hour
