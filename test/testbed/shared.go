package testbed

import (
	"fmt"
	"os"
	"runtime"
	"sync"
)

// Shared is a TB for a test bed that several tests share, brought up once in
// TestMain (a real node takes seconds to start): its cleanups run when Stop
// is called, after the last test.
//
//	var node *testbed.RealNode
//
//	func TestMain(m *testing.M) {
//		bed := &testbed.Shared{Name: "cluster"}
//		if !bed.Start(func(tb testbed.TB) { node = testbed.StartNode(tb, testbed.NodeOptions{}) }) {
//			os.Exit(1)
//		}
//		code := m.Run()
//		bed.Stop()
//		os.Exit(code)
//	}
type Shared struct {
	// Name prefixes the bed's log lines.
	Name string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

var _ TB = &Shared{}

// Start runs setup, which brings the bed up, and reports whether it
// succeeded. A failed setup (a Fatal in it) has its cleanups run at once.
func (s *Shared) Start(setup func(TB)) bool {
	done := make(chan struct{})
	go func() {
		// Fatal ends this goroutine, as it ends a test's.
		defer close(done)
		setup(s)
	}()
	<-done
	s.mu.Lock()
	failed := s.failed
	s.mu.Unlock()
	if failed {
		s.Stop()
	}
	return !failed
}

// Stop runs the cleanups, newest first, once.
func (s *Shared) Stop() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// Helper is a no-op: there is no test to attribute lines to.
func (s *Shared) Helper() {}

// Logf prints to stderr.
func (s *Shared) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", s.Name, fmt.Sprintf(format, args...))
}

// Fatal logs, marks the bed failed and ends the calling goroutine.
func (s *Shared) Fatal(args ...any) { s.fail(fmt.Sprint(args...)) }

// Fatalf logs, marks the bed failed and ends the calling goroutine.
func (s *Shared) Fatalf(format string, args ...any) { s.fail(fmt.Sprintf(format, args...)) }

// Cleanup registers f to run at Stop.
func (s *Shared) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *Shared) fail(msg string) {
	s.Logf("%s", msg)
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	runtime.Goexit()
}
