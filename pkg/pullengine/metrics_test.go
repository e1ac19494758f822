package pullengine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue() + out.GetGauge().GetValue()
}

// samples reads a histogram's observation count.
func samples(t *testing.T, m prometheus.Metric) uint64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}

func TestSizeBand(t *testing.T) {
	tests := []struct {
		size uint64
		want string
	}{
		{0, "N/A"},
		{1, "0-10MB"},
		{10 << 20, "0-10MB"},
		{10<<20 + 1, "10MB-100MB"},
		{42 << 20, "10MB-100MB"},
		{700 << 20, "500MB-1GB"},
		{3 << 30, "1GB-5GB"},
		{7 << 30, "5GB-10GB"},
		{15 << 30, "10GB-20GB"},
		{200 << 30, "GT100GB"},
	}
	for _, tt := range tests {
		if got := sizeBand(tt.size); got != tt.want {
			t.Errorf("sizeBand(%d) = %q, want %q", tt.size, got, tt.want)
		}
	}
}

func TestMetricsRecorded(t *testing.T) {
	success := value(t, pullsTotal.WithLabelValues(resultSuccess, ""))
	notFound := value(t, pullsTotal.WithLabelValues(resultFailure, string(ClassNotFound)))
	backoffs := value(t, pullBackOffs.WithLabelValues(string(ClassNotFound)))
	bytes := value(t, pulledBytes)
	observed := samples(t, pullDuration.WithLabelValues("10MB-100MB").(prometheus.Metric))

	h := newHarness(t, Options{})
	h.svc.failWith(key(t, "b"), errNotFoundCRI)
	h.enqueue("a", 0)
	h.enqueue("b", 0)
	h.result(t)
	h.result(t)

	if d := value(t, pullsTotal.WithLabelValues(resultSuccess, "")) - success; d != 1 {
		t.Errorf("success count +%v", d)
	}
	if d := value(t, pullsTotal.WithLabelValues(resultFailure, string(ClassNotFound))) - notFound; d != 1 {
		t.Errorf("NotFound count +%v", d)
	}
	if d := value(t, pullBackOffs.WithLabelValues(string(ClassNotFound))) - backoffs; d != 1 {
		t.Errorf("back-offs +%v", d)
	}
	if d := value(t, pulledBytes) - bytes; d != 42<<20 {
		t.Errorf("bytes +%v", d)
	}
	if n := samples(t, pullDuration.WithLabelValues("10MB-100MB").(prometheus.Metric)); n-observed != 1 {
		t.Errorf("duration observations +%d in the 10MB-100MB band", n-observed)
	}
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"warmer_image_pull_duration_seconds", "warmer_image_pulls_total", "warmer_image_pulls_in_flight",
		"warmer_image_pulls_queued", "warmer_image_pull_backoffs_total", "warmer_image_pulled_bytes_total"} {
		if !names[n] {
			t.Errorf("%s not registered on controller-runtime's registry", n)
		}
	}
}
