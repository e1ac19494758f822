// Package gatenode shows the warm gate (config/components/warm-gate) on a
// real node: kube-apiserver, kube-controller-manager, the real
// kube-scheduler and kubelet on containerd 2.x, with warmer installed
// from config/default as a user would. A Deployment's Pod opted in to the
// gate waits while its image travels a slow link, then the kubelet starts
// it from the image the agent pulled; an ungated Pod beside it pulls.
package gatenode
