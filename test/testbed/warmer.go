package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/warmer-dev/warmer/internal/image"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// Process is a program the test runs, such as a warmer agent, with its
// output in a log file. It is stopped at cleanup.
type Process struct {
	p *process
}

// StartProcess runs argv as a child process, logging to a file in a fresh
// directory, and stops it at cleanup. A race report in its log (a binary
// built with -race, see BuildWarmer) then fails the test, and so does a
// refusal by the API server when the process runs with a kubeconfig of
// AgentKubeconfig or ControllerKubeconfig (see checkRefusals).
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
		hostcheck.CheckRaces(t, name, pr.LogPath())
		checkRefusals(t, name, argv, pr.LogPath())
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

// builds are the warmer binaries this test binary compiled, with the race
// detector ([1]) and without ([0]).
var builds [2]struct {
	once sync.Once
	path string
	err  error
}

// BuildWarmer compiles cmd/warmer once per test binary and returns the
// path of the executable. It is removed when the test binary exits. When the
// test binary runs under the race detector, so does the warmer binary, and
// StartProcess fails the test on a race report in its log.
func BuildWarmer(t TB) string {
	t.Helper()
	return buildWarmer(t, hostcheck.RaceEnabled)
}

// BuildPlainWarmer compiles cmd/warmer without the race detector, whatever
// the test binary has, and as the release is built (the Dockerfile's and
// `make image`'s flags: static, -trimpath, -ldflags '-s -w'): for tests
// that measure the binary's memory or CPU, which the race detector
// multiplies (5-10 times the memory, 2-20 times the CPU, by Go's
// documentation), so that they measure what ships.
func BuildPlainWarmer(t TB) string {
	t.Helper()
	return buildWarmer(t, false)
}

func buildWarmer(t TB, race bool) string {
	t.Helper()
	b := &builds[0]
	if race {
		b = &builds[1]
	}
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "warmer-bin-")
		if err != nil {
			b.err = err
			return
		}
		hostcheck.GuardDir(dir)
		b.path = filepath.Join(dir, "warmer")
		cmd := exec.Command("go", warmerBuildArgs(b.path, race)...)
		cmd.Dir = RepoRoot(t)
		// -race needs cgo (and a C compiler); the environment may have
		// turned it off. The release build is static.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if race {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building cmd/warmer: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// warmerBuildArgs is the go command line that builds cmd/warmer into out:
// with the race detector, or as the release image's binary.
func warmerBuildArgs(out string, race bool) []string {
	if race {
		return []string{"build", "-o", out, "-race", "./cmd/warmer"}
	}
	return image.GoBuildArgs("dev", out)
}
