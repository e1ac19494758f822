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
}

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
func (p Progress) Left() (time.Duration, bool) {
	if !p.Known || p.Rate <= 0 || p.Done > p.Total {
		return 0, false
	}
	// At most ten thousand days: a crawling pull of a huge image must not
	// overflow time.Duration into a negative time left.
	secs := min(float64(p.Total-p.Done)/p.Rate, maxLeft.Seconds())
	return time.Duration(secs * float64(time.Second)), true
}

// maxLeft bounds Left.
const maxLeft = 10_000 * 24 * time.Hour
