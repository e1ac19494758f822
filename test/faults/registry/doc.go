// Package registry holds the registry and disk half of warmer's fault
// matrix (docs/reliability.md): the real agent, containerd and
// docker-registry, with the test bed's FaultProxy injecting server errors,
// rate limits, connection resets and slow bodies, a registry stopped
// mid-pull, and a containerd whose image filesystem is a small tmpfs.
package registry
