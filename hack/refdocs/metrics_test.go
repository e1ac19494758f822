package main

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	kubeletv1 "k8s.io/kubelet/config/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// Registered on controller-runtime's registry when imported, as in
	// the binary.
	_ "github.com/warmer-dev/warmer/controllers/agent"
	_ "github.com/warmer-dev/warmer/controllers/imagewarm"
	"github.com/warmer-dev/warmer/pkg/credprovider"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// TestMetricsMatchRegistries holds metrics.md's source, the definitions
// in the code, to what the code registers: every metric found is on a
// registry with the same help and labels, and the registries hold no
// warmer_ metric that was not found (one made in a way the parser does
// not see).
func TestMetricsMatchRegistries(t *testing.T) {
	ms, err := findMetrics("../..")
	if err != nil {
		t.Fatal(err)
	}
	engine := prometheus.NewRegistry()
	pullengine.New(nil, pullengine.Options{Registerer: engine})
	if _, err := credprovider.New(&kubeletv1.CredentialProviderConfig{}, credprovider.Options{BinDir: t.TempDir(), Registerer: engine}); err != nil {
		t.Fatal(err)
	}
	registries := []prometheus.Registerer{ctrlmetrics.Registry, engine}
	for _, m := range ms {
		found := 0
		for _, reg := range registries {
			probe := probeOf(m)
			err := reg.Register(probe)
			switch {
			case errors.As(err, new(prometheus.AlreadyRegisteredError)):
				found++
			case err == nil:
				reg.Unregister(probe)
			default:
				t.Errorf("%s is registered with other help or labels than its definition says: %v", m.Name, err)
			}
		}
		if found != 1 {
			t.Errorf("%s is on %d registries, want 1", m.Name, found)
		}
	}
	names := registeredNames(ctrlmetrics.Registry.(prometheus.Collector), engine)
	if len(names) != len(ms) {
		t.Errorf("the registries hold %d warmer_ metrics, the definitions found are %d: %v", len(names), len(ms), names)
	}
}

// probeOf is a collector of m's name, help and labels.
func probeOf(m metric) prometheus.Collector {
	switch m.Type {
	case "counter":
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
	case "gauge":
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
	case "histogram":
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m.Name, Help: m.Help}, m.Labels)
	}
	return prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: m.Name, Help: m.Help}, m.Labels)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// registeredNames are the warmer_ metrics the collectors describe.
func registeredNames(cs ...prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	var out []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && strings.HasPrefix(m[1], "warmer_") {
			out = append(out, m[1])
		}
	}
	return out
}
