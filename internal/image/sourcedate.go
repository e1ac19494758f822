package image

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// SourceDate reads SOURCE_DATE_EPOCH, the reproducible-builds convention
// for "the time of the source" (the Makefile passes the commit's time),
// which the image records as its creation time; unset means the Unix
// epoch.
func SourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0), nil
}
