package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// process is a child process the test bed owns.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// ownerVar names, in the environment of every process the bed starts
// (and of what those fork: containerd's shims inherit it), the test binary
// that started it. Packages run side by side, each its own binary, with
// the same cached binaries: a package checking what it left behind counts
// only its own.
const ownerVar = "WARMER_TESTBED_OWNER"

func ownerEnv() string { return fmt.Sprintf("%s=%d", ownerVar, os.Getpid()) }

// startedBy says whether pid's environment names the test binary of PID
// owner as the one that started it. An environment that cannot be read
// counts as owner's, so a check errs towards reporting.
func startedBy(pid, owner int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return true
	}
	return slices.Contains(strings.Split(string(b), "\x00"), fmt.Sprintf("%s=%d", ownerVar, owner))
}

// startProcess runs argv with its output in logPath. The child gets its own
// process group (so that it can be stopped with everything it forked) and is
// killed by the kernel if the test binary dies first.
func startProcess(name, logPath string, env []string, argv ...string) (*process, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(os.Environ(), env...), ownerEnv())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	hostcheck.GuardGroup(cmd.Process.Pid)
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		// The group may still hold children of the process; end them too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		hostcheck.UnguardGroup(cmd.Process.Pid)
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// kill sends SIGKILL to the process group and waits for the process to end.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// tail returns the last lines of the process's log, for failure messages.
func (p *process) tail(lines int) string {
	return tailFile(p.log, lines)
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitFor polls check until it succeeds, the process exits or the deadline
// passes; the error says which, with the process's last log lines.
func waitFor(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if p.exited() {
			exit := p.err
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("%s exited before %s (%w); log:\n%s", p.name, what, exit, p.tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no %s before the deadline: %w; log:\n%s", p.name, what, last, p.tail(30))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment
// ago. Another process may take it before the caller does; callers retry.
func FreePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// shortDir makes a directory with a short path under /tmp, removed at
// cleanup. Unix socket paths must stay under 108 bytes, which t.TempDir's
// long names break.
func shortDir(t TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "wb-"+prefix+"-")
	if err != nil {
		t.Fatalf("making a directory: %v", err)
	}
	hostcheck.GuardDir(dir)
	t.Cleanup(func() {
		unmountBelow(dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// unmountBelow detaches every mount at or below dir, deepest first, so that
// a containerd killed while unpacking leaves nothing mounted.
func unmountBelow(dir string) {
	mounts, err := mountsBelow(dir)
	if err != nil {
		return
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

// mountsBelow lists the mount points at or below dir, in mount order.
func mountsBelow(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lookPath finds a binary the test bed needs, with a hint on how to get it.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%s is not installed: run `make testbed` (it installs containerd and docker-registry with apt)", name)
	}
	return p, err
}

// childrenRunning lists the pids of this process's children whose executable
// lies in dir. envtest starts etcd and kube-apiserver in process groups of
// their own without telling us their pids; this finds them.
func childrenRunning(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(pid) != self {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parentOf reads a process's parent pid from /proc/PID/stat.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses; fields resume
	// after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
