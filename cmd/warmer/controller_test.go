package main

import (
	"io"
	"testing"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestTestFleetLeaseIsTheDefault checks that the test fleet's controller
// runs with the lease timings the binary has by default, so that what the
// fault tests measure (docs/reliability.md) is what a cluster gets.
func TestTestFleetLeaseIsTheDefault(t *testing.T) {
	var f controllerFlags
	fs := newFlagSet("controller", "", io.Discard)
	f.bind(fs)
	if err := parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	got := leaseFlags{testbed.DefaultController.LeaseDuration, testbed.DefaultController.RenewDeadline, testbed.DefaultController.RetryPeriod}
	if got != f.lease {
		t.Errorf("test fleet lease %+v, the controller's defaults %+v", got, f.lease)
	}
}
