package pullengine

import (
	"testing"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	reg := prometheus.NewPedanticRegistry()
	h := newHarness(t, Options{Registerer: reg})
	m := h.eng.metrics
	h.svc.failWith(key(t, "b"), errNotFoundCRI)
	h.enqueue("a", 0)
	h.enqueue("b", 0)
	h.result(t)
	h.result(t)

	if v := value(t, m.pullsTotal.WithLabelValues(resultSuccess, "")); v != 1 {
		t.Errorf("success count %v, want 1", v)
	}
	if v := value(t, m.pullsTotal.WithLabelValues(resultFailure, string(pull.ClassNotFound))); v != 1 {
		t.Errorf("NotFound count %v, want 1", v)
	}
	if v := value(t, m.pullCalls); v != 2 {
		t.Errorf("PullImage calls %v, want 2 (one per pull, with no credentials to try in turn)", v)
	}
	if v := value(t, m.pullBackOffs.WithLabelValues(string(pull.ClassNotFound))); v != 1 {
		t.Errorf("back-offs %v, want 1", v)
	}
	if v := value(t, m.pulledBytes); v != 42<<20 {
		t.Errorf("bytes %v, want %d", v, 42<<20)
	}
	if n := samples(t, m.pullDuration.WithLabelValues("10MB-100MB").(prometheus.Metric)); n != 1 {
		t.Errorf("%d duration observations in the 10MB-100MB band, want 1", n)
	}
	if v := value(t, m.pullsQueued) + value(t, m.pullsInFlight); v != 0 {
		t.Errorf("queued + in flight %v after every pull ended, want 0", v)
	}
	names := gathered(t, reg)
	for _, n := range []string{"warmer_image_pull_duration_seconds", "warmer_image_pulls_total", "warmer_image_pulls_in_flight",
		"warmer_image_pulls_queued", "warmer_image_pull_backoffs_total", "warmer_image_pulled_bytes_total",
		"warmer_image_fetched_bytes_total", "warmer_image_pull_throughput_bytes_per_second",
		"warmer_image_pulls_yielding", "warmer_image_pull_yields_total", "warmer_cri_pull_image_calls_total",
		"warmer_image_pull_pauses_total"} {
		if !names[n] {
			t.Errorf("%s not registered on the registry passed in", n)
		}
	}
}

// TestMetricsShared checks that a second engine on the same registry uses
// the metrics the first registered rather than failing, and that an engine
// without a registry registers nothing anywhere.
func TestMetricsShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := newMetrics(reg), newMetrics(reg)
	a.pulledBytes.Add(1)
	b.pulledBytes.Add(2)
	if v := value(t, a.pulledBytes); v != 3 {
		t.Errorf("two engines on one registry counted %v bytes, want 3 in one counter", v)
	}
	// The eleven metrics without labels; the vectors have no series yet.
	if n := len(gathered(t, reg)); n != 11 {
		t.Errorf("%d metric families gathered, want 11", n)
	}
	unregistered := newMetrics(nil)
	unregistered.pulledBytes.Add(5)
	if v := value(t, a.pulledBytes); v != 3 {
		t.Errorf("an engine without a registry changed the registered counter to %v", v)
	}
}

// gathered is the set of metric names reg serves.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}
