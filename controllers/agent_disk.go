package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// ConditionDiskPressure is the NodeWarm condition that says whether the
// disk guard holds pulls back because the image filesystem is too full.
const ConditionDiskPressure = "DiskPressure"

// diskCondition returns conds with DiskPressure set from the guard's last
// reading: True above the threshold, False below, Unknown when the level
// cannot be read (the guard then lets pulls through).
func diskCondition(conds []metav1.Condition, u pullengine.DiskUsage) []metav1.Condition {
	c := metav1.Condition{Type: ConditionDiskPressure, Status: metav1.ConditionUnknown, Reason: "LevelUnknown",
		Message: "The image filesystem's level cannot be read; pulls are not held back"}
	switch {
	case u.Pressure:
		c.Status, c.Reason = metav1.ConditionTrue, "AboveThreshold"
		c.Message = fmt.Sprintf("Image filesystem %s is %d%% full, above the %d%% pull threshold: no pull starts", u.Mountpoint, u.Percent, u.ThresholdPercent)
	case u.Known:
		c.Status, c.Reason = metav1.ConditionFalse, "BelowThreshold"
		c.Message = fmt.Sprintf("Image filesystem %s is %d%% full, pull threshold %d%%", u.Mountpoint, u.Percent, u.ThresholdPercent)
	}
	out := append([]metav1.Condition(nil), conds...)
	meta.SetStatusCondition(&out, c)
	return out
}
