package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Process is a program the test runs, such as a warmer agent, with its
// output in a log file. It is stopped at cleanup.
type Process struct {
	p *process
}

// StartProcess runs argv as a child process, logging to a file in a fresh
// directory, and stops it at cleanup.
func StartProcess(t TB, name string, argv ...string) *Process {
	t.Helper()
	dir := shortDir(t, "proc")
	p, err := startProcess(name, filepath.Join(dir, "out.log"), nil, argv...)
	if err != nil {
		t.Fatal(err)
	}
	pr := &Process{p: p}
	t.Cleanup(func() { pr.Stop() })
	return pr
}

// Stop stops the process: SIGTERM, then SIGKILL after 10 s.
func (p *Process) Stop() { p.p.stop(10 * time.Second) }

// Kill kills the process at once.
func (p *Process) Kill() { p.p.kill() }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// Log returns the last lines of the process's output.
func (p *Process) Log(lines int) string { return p.p.tail(lines) }

// LogPath is the file the process's output goes to.
func (p *Process) LogPath() string { return p.p.log }

// Pid is the process id.
func (p *Process) Pid() int { return p.p.cmd.Process.Pid }

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// BuildWarmer compiles cmd/warmer once per test binary and returns the
// path of the executable. It is removed when the test binary exits.
func BuildWarmer(t TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "warmer-bin-")
		if err != nil {
			buildErr = err
			return
		}
		guardDir(dir)
		buildPath = filepath.Join(dir, "warmer")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/warmer")
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building cmd/warmer: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}
