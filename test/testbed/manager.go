package testbed

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
)

// RunManager starts mgr until the test ends, and fails the test if it
// stopped with an error.
func RunManager(t TB, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(fmt.Errorf("manager: %w", err))
		}
	})
}
