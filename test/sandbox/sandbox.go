package main

import (
	"fmt"
	"os"
	"sync"
)

// sandbox lets the test bed, written for tests, run in a program: it
// satisfies testbed.TB, keeps the cleanups and runs them on the way out.
type sandbox struct {
	mu       sync.Mutex
	cleanups []func()
}

// Helper is a no-op: there is no test report to attribute lines in.
func (s *sandbox) Helper() {}

// Logf prints progress to stderr.
func (s *sandbox) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", args...)
}

// Fatal stops everything started so far and exits.
func (s *sandbox) Fatal(args ...any) { s.fail(fmt.Sprint(args...)) }

// Fatalf stops everything started so far and exits.
func (s *sandbox) Fatalf(format string, args ...any) { s.fail(fmt.Sprintf(format, args...)) }

// Cleanup registers f to run when the sandbox stops, last registered first.
func (s *sandbox) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *sandbox) fail(msg string) {
	fmt.Fprintln(os.Stderr, "sandbox: "+msg)
	s.stop()
	os.Exit(1)
}

// stop runs the cleanups once, newest first.
func (s *sandbox) stop() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
