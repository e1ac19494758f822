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
// directory, and stops it at cleanup. A race report in its log (a binary
// built with -race, see BuildWarmer) then fails the test.
func StartProcess(t TB, name string, argv ...string) *Process {
	t.Helper()
	dir := shortDir(t, "proc")
	p, err := startProcess(name, filepath.Join(dir, "out.log"), nil, argv...)
	if err != nil {
		t.Fatal(err)
	}
	pr := &Process{p: p}
	t.Cleanup(func() {
		pr.Stop()
		checkRaces(t, name, pr.LogPath())
	})
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
// path of the executable. It is removed when the test binary exits. When the
// test binary runs under the race detector, so does the warmer binary, and
// StartProcess fails the test on a race report in its log.
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
		cmd := exec.Command("go", warmerBuildArgs(buildPath)...)
		cmd.Dir = RepoRoot(t)
		if raceEnabled {
			// -race needs cgo (and a C compiler); the environment may
			// have turned it off for the release build.
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building cmd/warmer: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// warmerBuildArgs is the go command line that builds cmd/warmer into out,
// with -race when the test binary has it.
func warmerBuildArgs(out string) []string {
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	return append(args, "./cmd/warmer")
}
