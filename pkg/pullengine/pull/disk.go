package pull

// DiskUsage is the fill level of the fullest image filesystem.
type DiskUsage struct {
	// Known is false when the level could not be read; the guard then
	// holds pulls or lets them through as it is told (Pressure).
	Known bool
	// Mountpoint is the filesystem the runtime reports for images.
	Mountpoint string
	// CapacityBytes and AvailableBytes come from statfs on Mountpoint.
	CapacityBytes  uint64
	AvailableBytes uint64
	// ImagesBytes is what the runtime says its images use there.
	ImagesBytes uint64
	// Percent is the used share of the filesystem, as the kubelet's image
	// GC computes it (100 - available*100/capacity).
	Percent int
	// ThresholdPercent is the guard's threshold; Pressure says that the
	// guard holds pulls back: the level is known and above it, or unknown
	// while the guard is told to hold then (HoldWhenLevelUnknown).
	ThresholdPercent int
	Pressure         bool
}
