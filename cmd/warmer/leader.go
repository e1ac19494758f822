package main

import (
	"cmp"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderElectionID is the name of the controller's leader election Lease.
const leaderElectionID = "warmer-controller.warmer.dev"

// podNameEnv is where the Deployment puts the controller's Pod name (the
// Downward API).
const podNameEnv = "POD_NAME"

// leaderLock is the controller's Lease lock held under its Pod's name, or
// nil (controller-runtime's own lock, under the host name and a random
// suffix) outside a Pod or without leader election. A Pod's name is unique,
// and the kubelet starts a container again only once the old one has
// ended: a controller that starts again in its own Pod (a crash, out of
// memory, the node rebooted) finds the Lease its own and leads at once,
// where a new identity would wait out the lease duration (60 s) of a
// leader that could not release it. A new Pod (a roll, a reschedule) has
// a new name, as before.
func leaderLock(cfg *rest.Config, f *controllerFlags) (resourcelock.Interface, error) {
	pod, ns := os.Getenv(podNameEnv), cmp.Or(f.leaderNamespace, os.Getenv("POD_NAMESPACE"))
	if !f.leaderElect || pod == "" || ns == "" {
		return nil, nil
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not cost the lead: as controller-runtime's lock.
	cfg.Timeout = max(f.lease.renewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, ns, leaderElectionID,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: pod})
}
