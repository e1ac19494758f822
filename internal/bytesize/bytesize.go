// Package bytesize writes byte counts for people: progress in status
// fields, events and messages.
package bytesize

import "fmt"

// IEC writes n with the largest binary unit it reaches, one decimal
// below 10 units and none above: "512 B", "1.5 KiB", "12 MiB", "3.2 GiB".
func IEC(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	prefix := "KMGTPE"[i]
	if v < 10 {
		return fmt.Sprintf("%.1f %ciB", v, prefix)
	}
	return fmt.Sprintf("%.0f %ciB", v, prefix)
}
