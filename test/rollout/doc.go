// Package rollout shows rollouts that wait for the warm
// (config/components/warm-gate) on real parts: kube-apiserver, the real
// kube-scheduler, ten simulated nodes (containerd and a warmer agent each,
// no kubelet) and the warmer controller, all as shipped.
//
// No kube-controller-manager runs: the tests create a rollout's Pods
// directly from the Deployment's new template, as its ReplicaSet would,
// and "bound" (spec.nodeName set by the scheduler) stands for started.
package rollout
