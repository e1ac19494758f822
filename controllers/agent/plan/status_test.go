package plan

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

func TestDiskCondition(t *testing.T) {
	runtime := metav1.Condition{Type: warmv1.ConditionRuntimeReady, Status: metav1.ConditionTrue, Reason: "RuntimeAnswering"}
	tests := []struct {
		name   string
		u      pull.DiskUsage
		status metav1.ConditionStatus
		reason string
	}{
		{"unknown", pull.DiskUsage{}, metav1.ConditionUnknown, "LevelUnknown"},
		{"below", pull.DiskUsage{Known: true, Mountpoint: "/var/lib/containerd", Percent: 40, ThresholdPercent: 80}, metav1.ConditionFalse, "BelowThreshold"},
		{"above", pull.DiskUsage{Known: true, Mountpoint: "/var/lib/containerd", Percent: 90, ThresholdPercent: 80, Pressure: true}, metav1.ConditionTrue, "AboveThreshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diskCondition([]metav1.Condition{runtime}, tt.u, metav1.NewTime(t0))
			c := meta.FindStatusCondition(got, warmv1.ConditionDiskPressure)
			if c == nil || c.Status != tt.status || c.Reason != tt.reason {
				t.Fatalf("condition %+v, want %s %s", c, tt.status, tt.reason)
			}
			if tt.u.Known && !strings.Contains(c.Message, tt.u.Mountpoint) {
				t.Errorf("message %q does not name the filesystem", c.Message)
			}
			if meta.FindStatusCondition(got, warmv1.ConditionRuntimeReady) == nil || len(got) != 2 {
				t.Errorf("other conditions not kept: %+v", got)
			}
		})
	}
}
