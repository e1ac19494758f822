package testbed

import (
	"testing"

	"sigs.k8s.io/yaml"
)

func TestMergeKubeletConfig(t *testing.T) {
	base := "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 100\nfailSwapOn: false\n"
	b, err := mergeKubeletConfig(base, map[string]any{
		"imageGCHighThresholdPercent": 50,
		"registerWithTaints":          []map[string]string{{"key": "warmer.dev/warming", "effect": "NoSchedule"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["imageGCHighThresholdPercent"] != float64(50) || got["failSwapOn"] != false || got["kind"] != "KubeletConfiguration" {
		t.Errorf("merged configuration lost or kept the wrong fields:\n%s", b)
	}
	if _, ok := got["registerWithTaints"]; !ok {
		t.Errorf("registerWithTaints missing:\n%s", b)
	}
}
