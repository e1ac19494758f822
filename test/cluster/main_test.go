// Package cluster tests warmer on a real one-node Kubernetes cluster, as a
// user runs it: a kubelet with containerd 2.x and runc, the control plane's
// controllers, and images from a local registry under their public names.
// One node serves every test in the package: it takes seconds to start.
package cluster

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// mirrored is a public registry whose pulls the node serves from the test
// registry; docker.io is too, for config/samples' images.
const mirrored = "ghcr.io"

// cloudMirrored is a public registry whose pulls the node serves from
// authReg, which asks for a login: the registry a cloud's credential
// plugin authorises (credplugin_test.go).
const cloudMirrored = "quay.io"

// slowMirrored is a public registry whose pulls the node serves from reg
// through slow, a fault proxy the fault tests slow down (faults_test.go).
const slowMirrored = "gcr.io"

var (
	node *testbed.RealNode
	reg  *testbed.Registry
	// authReg takes only authReg.Username() with authPassword.
	authReg      *testbed.Registry
	authPassword string
	slow         *faults.FaultProxy
)

func TestMain(m *testing.M) {
	// The tests' clients log nothing they need; unset, controller-runtime
	// prints a warning with a stack trace when the first one is made.
	ctrllog.SetLogger(logr.Discard())
	bed := &testbed.Shared{Name: "cluster"}
	var traces testbed.Traces
	if !bed.Start(func(tb testbed.TB) {
		reg = testbed.StartRegistry(tb, testbed.RegistryOptions{Name: "cluster"})
		authPassword = hostcheck.RandomPassword(tb)
		authReg = testbed.StartRegistry(tb, testbed.RegistryOptions{Name: "cluster-auth", Username: "robot", Password: authPassword})
		slow = faults.StartFaultProxy(tb, reg.Host)
		node = testbed.StartNode(tb, testbed.NodeOptions{Mirrors: map[string]string{
			mirrored: reg.Host, "docker.io": reg.Host, cloudMirrored: authReg.Host, slowMirrored: slow.Host}})
		traces = node.Traces()
	}) {
		os.Exit(1)
	}
	code := m.Run()
	bed.Stop()
	// Leaving no trace is part of what the package tests: a node that
	// stopped must have undone every host change it made.
	if left := testbed.LeftBehind(traces); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the real node left behind:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	os.Exit(code)
}
