package testbed

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// recordingTB is a TB whose failures are recorded instead of ending a test,
// and whose cleanups run when the test says so.
type recordingTB struct {
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper()                      {}
func (r *recordingTB) Logf(string, ...any)          {}
func (r *recordingTB) Cleanup(f func())             { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Fatal(args ...any)            { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recordingTB) Fatalf(f string, args ...any) { r.Errorf(f, args...) }
func (r *recordingTB) Errorf(f string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(f, args...))
}

func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

const raceChildEnv = "WARMER_TESTBED_RACE_CHILD"

// TestRaceInProcessFailsTest starts a program with a data race through
// StartProcess and checks that the cleanup fails the test with the race
// detector's report. The program is this test binary (built with -race, as
// make test builds it), which races on purpose when raceChildEnv is set.
func TestRaceInProcessFailsTest(t *testing.T) {
	if os.Getenv(raceChildEnv) != "" {
		raceOnPurpose()
		return
	}
	if !hostcheck.RaceEnabled {
		t.Skip("needs the race detector: run with go test -race (make test does)")
	}
	t.Setenv(raceChildEnv, "1")
	rec := &recordingTB{}
	p := StartProcess(rec, "racy child", os.Args[0], "-test.run=^TestRaceInProcessFailsTest$")
	deadline := time.Now().Add(time.Minute)
	for !p.Exited() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	log := p.Log(40) // the cleanups remove it
	rec.runCleanups()
	if len(rec.errors) != 1 {
		t.Fatalf("want one failure from the racy child, got %d: %q\nlog:\n%s", len(rec.errors), rec.errors, log)
	}
	if msg := rec.errors[0]; !strings.Contains(msg, "WARNING: DATA RACE") || !strings.Contains(msg, "raceOnPurpose") {
		t.Errorf("the failure does not carry the race report: %s", msg)
	}
}

// raceOnPurpose writes one variable from two goroutines without
// synchronisation, which the race detector reports.
func raceOnPurpose() {
	var n int
	done := make(chan struct{})
	go func() {
		n++
		close(done)
	}()
	n++
	<-done
	_ = n
}

// TestWarmerBuiltWithRace checks that BuildWarmer's binary carries the race
// detector exactly when this test binary does, and BuildPlainWarmer's never;
// a binary without it is built with the release's flags.
func TestWarmerBuiltWithRace(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(TB) string
		want  bool
	}{{"BuildWarmer", BuildWarmer, hostcheck.RaceEnabled}, {"BuildPlainWarmer", BuildPlainWarmer, false}} {
		out, err := exec.Command("go", "version", "-m", c.build(t)).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m: %v\n%s", err, out)
		}
		if got := strings.Contains(string(out), "-race=true"); got != c.want {
			t.Errorf("%s: built with -race=%v, want %v (test binary -race=%v):\n%s", c.name, got, c.want, hostcheck.RaceEnabled, out)
		}
		if c.want {
			continue
		}
		// What ships, so what the benchmarks measure: the release flags
		// (go records -ldflags only without -trimpath: -s shows as no
		// symbol table).
		for _, flag := range []string{"-trimpath=true", "CGO_ENABLED=0"} {
			if !strings.Contains(string(out), flag) {
				t.Errorf("%s: not built with %s, as the release is:\n%s", c.name, flag, out)
			}
		}
		if f, err := elf.Open(c.build(t)); err != nil {
			t.Error(err)
		} else {
			if f.Section(".symtab") != nil {
				t.Errorf("%s: has a symbol table; the release is linked with -s -w", c.name)
			}
			_ = f.Close()
		}
	}
}
