// Package promreg registers Prometheus collectors that several instances
// of one component share: a second engine or provider set on the same
// registry gets the collectors the first registered, not a panic.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or the collector of the same
// type already registered under its name. Any other failure is a
// programming error (a clash with a different metric of the same name),
// and panics as MustRegister does.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}
