// Package pace holds the one rule both of warmer's controllers follow when
// they write a status: a result (a settled status, one the user waits for)
// is written at once; progress is written at most once per interval. The
// agent applies it to its NodeWarm, the ImageWarm controller to each
// ImageWarm; each decides for itself what counts as a result and since
// when the interval runs.
package pace

import "time"

// Wait is how long a status must wait before it is written, at now: none
// for a result, else what is left of interval since last (none once it has
// run out).
func Wait(result bool, last, now time.Time, interval time.Duration) time.Duration {
	if result {
		return 0
	}
	return max(0, last.Add(interval).Sub(now))
}
