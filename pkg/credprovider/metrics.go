package credprovider

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warmer-dev/warmer/internal/promreg"
)

// metrics count plugin runs and cache hits, by provider name: a label
// bounded by the configuration.
type metrics struct {
	runs      *prometheus.CounterVec
	cacheHits *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warmer_credential_provider_runs_total",
			Help: "Credential provider plugin runs, by provider and result (Success, PluginFailed, PluginTimeout, PluginBadResponse, Canceled).",
		}, []string{"provider", "result"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warmer_credential_provider_cache_hits_total",
			Help: "Credential lookups answered from a provider's cache, without running its plugin.",
		}, []string{"provider"}),
	}
	if reg != nil {
		m.runs = promreg.Register(reg, m.runs)
		m.cacheHits = promreg.Register(reg, m.cacheHits)
	}
	return m
}

// observeRun counts one plugin run.
func (m *metrics) observeRun(provider string, err error) {
	result := "Success"
	if err != nil {
		result = "Canceled"
		if pe, ok := errors.AsType[*Error](err); ok {
			result = string(pe.Kind)
		}
	}
	m.runs.WithLabelValues(provider, result).Inc()
}
