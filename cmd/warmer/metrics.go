package main

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions configures the /metrics server. Secure, it serves HTTPS
// with a certificate controller-runtime makes in memory at start (scrapers
// skip verification or pin nothing: what protects the metrics is the
// bearer token, which TLS keeps off the wire), and hands every request to
// the API server: a TokenReview says who the token belongs to and a
// SubjectAccessReview whether they may get the non-resource URL /metrics.
// Unauthenticated requests get 401, unauthorized ones 403.
func (c *commonFlags) metricsOptions() metricsserver.Options {
	o := metricsserver.Options{BindAddress: c.metricsAddr}
	if c.metricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
