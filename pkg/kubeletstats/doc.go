// Package kubeletstats reads one node's image filesystem figures from its
// kubelet's Summary API (GET /stats/summary on the kubelet's port, 10250 by
// default), so that the agent learns how full the image filesystem is
// without mounting any of the runtime's state: the figures are the
// kubelet's own, the ones its image garbage collection acts on.
//
// Requests carry the caller's credentials (in a Pod, the service account's
// token, re-read as it rotates). A kubelet with webhook authorization asks
// the API server whether that identity may "get" the subresource
// nodes/stats; warmer's agent role grants that and nothing else on the
// kubelet (never nodes/proxy, which would also allow exec).
//
// The kubelet's serving certificate is checked against the cluster's CA
// unless another bundle is given: kubelets whose certificates are signed
// through the cluster's CSR API (serverTLSBootstrap) pass. A kubelet that
// signs its own certificate (kubeadm's default) names only its host name
// in it, so no CA verifies it at the node's address; only skipping
// verification reads it, which sends the token to whoever answers there.
//
// Only the three figures needed are decoded; the Summary API's Go types
// live in k8s.io/kubelet, a module not worth adding for three fields. The
// package has no dependency on controller-runtime.
package kubeletstats
