package testbed

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A guard is a small shell process that outlives the test binary by a moment.
// It reads, on a pipe from the test binary, the process groups and
// directories the test bed owns. When the pipe closes, which the kernel does
// however the test binary ends (a failed test, a panic, -timeout, SIGKILL), it
// kills the groups still listed, detaches mounts below the directories and
// removes them. t.Cleanup does the same in the ordinary case; the guard is for
// the cases where no Go code runs any more. It also covers processes the test
// bed does not start itself: envtest's etcd and kube-apiserver.
const guardScript = `
trap '' INT TERM HUP
pgs=" "; dirs=""
while read -r kind arg; do
	case "$kind" in
	pg) pgs="$pgs$arg " ;;
	unpg) pgs=$(printf '%s' "$pgs" | sed "s/ $arg / /") ;;
	dir) dirs="$dirs $arg" ;;
	esac
done
for p in $pgs; do kill -KILL "-$p" 2>/dev/null; done
for d in $dirs; do
	awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null; done
	rm -rf "$d"
done
`

type guard struct {
	mu  sync.Mutex
	w   io.WriteCloser
	err error
}

var theGuard guard

// send writes one line to the guard, starting it the first time.
func (g *guard) send(kind, arg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil && g.err == nil {
		g.w, g.err = startGuard()
	}
	if g.err != nil {
		return // Pdeathsig and t.Cleanup still stop what we started.
	}
	_, _ = fmt.Fprintf(g.w, "%s %s\n", kind, arg)
}

func startGuard() (io.WriteCloser, error) {
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Its own process group keeps a Ctrl-C aimed at `go test` from killing
	// the guard before it has done its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait() }()
	return w, nil
}

// guardGroup asks the guard to kill process group pgid if the test binary
// dies before unguardGroup is called.
func guardGroup(pgid int) { theGuard.send("pg", strconv.Itoa(pgid)) }

// unguardGroup withdraws a process group that has been stopped.
func unguardGroup(pgid int) { theGuard.send("unpg", strconv.Itoa(pgid)) }

// guardDir asks the guard to unmount and remove dir when the test binary ends.
func guardDir(dir string) { theGuard.send("dir", dir) }

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
