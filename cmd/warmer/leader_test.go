package main

import (
	"testing"

	"k8s.io/client-go/rest"
)

// TestLeaderLockIdentity: in a Pod the controller holds the Lease under its
// Pod's name, so a restart in the same Pod leads again at once; elsewhere,
// or without leader election, controller-runtime's own lock (nil here).
func TestLeaderLockIdentity(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	f := &controllerFlags{leaderElect: true, leaderNamespace: "warmer-system"}
	f.lease.renewDeadline = 40e9

	t.Setenv(podNameEnv, "warmer-controller-7d9f-abcde")
	lock, err := leaderLock(cfg, f)
	if err != nil || lock == nil {
		t.Fatalf("in a Pod: %v, %v", lock, err)
	}
	if got := lock.Identity(); got != "warmer-controller-7d9f-abcde" {
		t.Errorf("identity %q, want the Pod's name", got)
	}
	if got := lock.Describe(); got != "warmer-system/"+leaderElectionID {
		t.Errorf("lock %q", got)
	}

	f.leaderElect = false
	if lock, err := leaderLock(cfg, f); lock != nil || err != nil {
		t.Errorf("without leader election: %v, %v", lock, err)
	}
	f.leaderElect = true
	t.Setenv(podNameEnv, "")
	if lock, err := leaderLock(cfg, f); lock != nil || err != nil {
		t.Errorf("outside a Pod: %v, %v", lock, err)
	}
}
