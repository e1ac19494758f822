package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "shared_total", Help: "h"}
	first := Register(reg, prometheus.NewCounter(opts))
	second := Register(reg, prometheus.NewCounter(opts))
	if first != second {
		t.Fatal("the second registration did not get the first collector")
	}
	defer func() {
		if recover() == nil {
			t.Error("a clash with another metric of the same name did not panic")
		}
	}()
	Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "shared_total", Help: "other"}))
}
