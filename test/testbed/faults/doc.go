// Package faults holds the test bed's fault proxies: small servers on
// loopback that stand between containerd and a test registry and
// misbehave on demand, as no real registry does when asked. Image
// references name a proxy's Host instead of the registry's; containerd
// reaches loopback hosts over plain HTTP without configuration.
//
//   - faultproxy.go: FaultProxy, an HTTP reverse proxy that answers 500
//     or 429, resets the connection (before or partway through a
//     response) or slows response bodies, for every path or for blobs or
//     manifests only (Fault, FaultMode, FaultPaths), and logs every
//     request it saw (ProxyRequest). faultproxy_test.go checks each mode
//     against a stand-in upstream, no registry needed.
//   - proxy.go: SlowProxy, a TCP proxy that passes a registry's responses
//     through at a fixed rate, so that pulls take long enough to be
//     caught under way.
//
// Both stop at cleanup. The registries they front come from the test bed
// itself (testbed.StartRegistry).
package faults

// TB is the part of testing.TB the proxies use. A *testing.T satisfies it,
// and so does every testbed.TB.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}
