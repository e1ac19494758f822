package agent

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// The NodeWarm status's pieces, as the planner puts them together.

// Conditions of a NodeWarm.
const (
	// ConditionRuntimeReady says whether the container runtime answers.
	ConditionRuntimeReady = "RuntimeReady"
	// ConditionDiskPressure says whether pulls are held back because the
	// image filesystem is too full.
	ConditionDiskPressure = "DiskPressure"
)

func engineState(s pullengine.State) warmv1.ImageState {
	switch s {
	case pullengine.StatePulling:
		return warmv1.ImagePulling
	case pullengine.StateBackOff:
		return warmv1.ImageBackOff
	case pullengine.StateFailed:
		return warmv1.ImageFailed
	case pullengine.StatePulled:
		return warmv1.ImagePresent
	default:
		return warmv1.ImageQueued
	}
}

func requestedBy(w *wantedImage) []string {
	n := min(len(w.warms), warmv1.MaxRequestedBy)
	out := make([]string, n)
	for i := range out {
		out[i] = w.warms[i].String()
	}
	return out
}

// count fills in the summary counts.
func count(st *warmv1.NodeWarmStatus) {
	st.Desired, st.Present, st.Pulling, st.Failed = int32(len(st.Images)), 0, 0, 0
	for _, img := range st.Images {
		switch img.State {
		case warmv1.ImagePresent:
			st.Present++
		case warmv1.ImagePulling, warmv1.ImageQueued:
			st.Pulling++
		case warmv1.ImageBackOff, warmv1.ImageFailed:
			st.Failed++
		}
	}
}

// digestOnly keeps "sha256:..." of "name@sha256:...".
func digestOnly(repoDigest string) string {
	if i := strings.LastIndexByte(repoDigest, '@'); i >= 0 {
		return repoDigest[i+1:]
	}
	return repoDigest
}

func imageFilesystem(u pullengine.DiskUsage) *warmv1.ImageFilesystem {
	if u.Mountpoint == "" && !u.Known {
		return nil
	}
	fs := &warmv1.ImageFilesystem{Mountpoint: u.Mountpoint, UsedBytes: int64(u.ImagesBytes)}
	if u.Known {
		fs.CapacityBytes, fs.UsedPercent = int64(u.CapacityBytes), int32(u.Percent)
	}
	return fs
}

// runtimeCondition returns conds with RuntimeReady set.
func runtimeCondition(conds []metav1.Condition, status metav1.ConditionStatus, reason, msg string, now metav1.Time) []metav1.Condition {
	return setCondition(conds, metav1.Condition{Type: ConditionRuntimeReady, Status: status, Reason: reason, Message: msg}, now)
}

// diskCondition returns conds with DiskPressure set from the guard's last
// reading: True above the threshold, False below, Unknown when the level
// cannot be read (the guard then lets pulls through).
func diskCondition(conds []metav1.Condition, u pullengine.DiskUsage, now metav1.Time) []metav1.Condition {
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
	return setCondition(conds, c, now)
}

// diskMessage says why an image waits for space.
func diskMessage(u pullengine.DiskUsage) string {
	return fmt.Sprintf("image filesystem %s is %d%% full, above the %d%% pull threshold; waiting for space",
		u.Mountpoint, u.Percent, u.ThresholdPercent)
}

// setCondition returns a copy of conds with c set; a change of status
// takes now as its transition time (meta.SetStatusCondition would read the
// clock itself).
func setCondition(conds []metav1.Condition, c metav1.Condition, now metav1.Time) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	c.LastTransitionTime = now
	meta.SetStatusCondition(&out, c)
	return out
}
