package image

// What the commands that build the image read from their environment and
// flags.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
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

// ParsePlatforms reads a comma-separated list of platforms, such as
// linux/amd64,linux/arm64.
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		out = append(out, *plat)
	}
	return out, nil
}
