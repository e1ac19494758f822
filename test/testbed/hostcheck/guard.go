package hostcheck

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A guard is a small shell process that outlives the test binary by a moment.
// It reads, on a pipe from the test binary, what the test bed owns and what
// it changed on the host. When the pipe closes, which the kernel does however
// the test binary ends (a failed test, a panic, -timeout, SIGKILL), it kills
// the process groups still listed, then the processes a real node leaves
// outside them (containerd's shims, the containers in the node's cgroups),
// detaches mounts below the directories and removes them, removes the
// node's cgroups, writes back the sysctls, removes the addresses and log
// links, and only then ends. t.Cleanup does the same in the ordinary case;
// the guard is for the cases where no Go code runs any more. It also covers
// processes the test bed does not start itself: envtest's etcd and
// kube-apiserver.
//
// Its input is one command a line:
//
//	pg PGID | unpg PGID     a process group to kill, or one that has ended
//	dir PATH                unmount everything below PATH and remove it
//	procs TEXT              kill every process whose command line has TEXT
//	cgroup NAME             kill what runs in cgroup NAME of each hierarchy, remove it
//	sysctl KEY VALUE        write VALUE back to /proc/sys/KEY
//	addr CIDR DEV           remove the address CIDR from DEV
//	links DIR PREFIX        remove the symbolic links in DIR that point below PREFIX
//	rmdir PATH              remove PATH if it is empty (last of all)
//	lock PATH               take an exclusive lock on PATH, held until the guard
//	                        ends; answers "locked" (or "timeout") on stdout, at
//	                        once when it already holds it
//
// The lock is how real nodes in different test binaries take turns: the
// host's sysctls are saved by one and must not be saved again, half
// changed, by another before the first guard has written them back.
const guardScript = `
trap '' INT TERM HUP
pgs=" "; locked=""; dirs=""; procs=""; cgroups=""; sysctls=""; addrs=""; links=""; rmdirs=""
while read -r kind arg; do
	case "$kind" in
	pg) pgs="$pgs$arg " ;;
	unpg) pgs=$(printf '%s' "$pgs" | sed "s/ $arg / /") ;;
	dir) dirs="$dirs $arg" ;;
	procs) procs="$procs $arg" ;;
	cgroup) cgroups="$cgroups $arg" ;;
	sysctl) sysctls="$sysctls$arg
" ;;
	addr) addrs="$addrs$arg
" ;;
	links) links="$links$arg
" ;;
	rmdir) rmdirs="$rmdirs $arg" ;;
	lock)
		if [ "$locked" = "$arg" ]; then echo locked; continue; fi
		exec 9>>"$arg"
		if flock -w 1200 9; then locked=$arg; echo locked; else echo timeout; fi ;;
	esac
done
for p in $pgs; do kill -KILL "-$p" 2>/dev/null; done
for s in $procs; do
	for d in /proc/[0-9]*; do
		tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -qF -- "$s" && kill -KILL "${d#/proc/}" 2>/dev/null
	done
done
cgkill() {
	for c in $cgroups; do
		for h in /sys/fs/cgroup/*/"$c"; do
			[ -d "$h" ] && find "$h" -name cgroup.procs -exec cat {} + 2>/dev/null
		done
	done | sort -u | while read -r p; do kill -KILL "$p" 2>/dev/null; done
}
cgkill; sleep 0.2; cgkill
# All unmounts before any removal, and without -n umount(8) would create
# /run/mount, one of the directories a node removes.
for d in $dirs; do
	awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -n -l "$m" 2>/dev/null; done
done
for d in $dirs; do rm -rf "$d"; done
for i in 1 2 3 4 5 6 7 8 9 10; do
	left=""
	for c in $cgroups; do
		for h in /sys/fs/cgroup/*/"$c"; do
			[ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
			[ -d "$h" ] && left=1
		done
	done
	[ -z "$left" ] && break
	cgkill; sleep 0.5
done
printf '%s' "$sysctls" | while read -r k v; do [ -n "$k" ] && echo "$v" >"/proc/sys/$k"; done
printf '%s' "$addrs" | while read -r a dev; do [ -n "$a" ] && ip addr del "$a" dev "$dev" 2>/dev/null; done
printf '%s' "$links" | while read -r d prefix; do
	[ -n "$d" ] || continue
	for l in "$d"/*; do
		[ -L "$l" ] || continue
		case "$(readlink "$l")" in "$prefix"/*) rm -f "$l" ;; esac
	done
done
for d in $rmdirs; do rmdir "$d" 2>/dev/null; done
`

type guard struct {
	mu  sync.Mutex
	w   io.WriteCloser
	r   *bufio.Reader
	err error
}

var theGuard guard

// send writes one line to the guard, starting it the first time.
func (g *guard) send(kind, arg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sendLocked(kind, arg)
}

func (g *guard) sendLocked(kind, arg string) {
	if g.w == nil && g.err == nil {
		g.w, g.r, g.err = startGuard()
	}
	if g.err != nil {
		return // Pdeathsig and t.Cleanup still stop what we started.
	}
	_, _ = fmt.Fprintf(g.w, "%s %s\n", kind, arg)
}

// lock has the guard take an exclusive lock on path and waits until it
// holds it. The lock lasts until the guard ends, after the test binary.
func (g *guard) lock(path string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sendLocked("lock", path)
	if g.err != nil {
		return fmt.Errorf("no guard to hold %s: %w", path, g.err)
	}
	line, err := g.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for the lock on %s: %w", path, err)
	}
	if strings.TrimSpace(line) != "locked" {
		return fmt.Errorf("another test binary held %s for 20 minutes", path)
	}
	return nil
}

func startGuard() (io.WriteCloser, *bufio.Reader, error) {
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	// Its own process group keeps a Ctrl-C aimed at `go test` from killing
	// the guard before it has done its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	go func() { _ = cmd.Wait() }()
	return w, bufio.NewReader(out), nil
}

// GuardGroup asks the guard to kill process group pgid if the test binary
// dies before UnguardGroup is called.
func GuardGroup(pgid int) { theGuard.send("pg", strconv.Itoa(pgid)) }

// UnguardGroup withdraws a process group that has been stopped.
func UnguardGroup(pgid int) { theGuard.send("unpg", strconv.Itoa(pgid)) }

// GuardDir asks the guard to unmount and remove dir when the test binary ends.
func GuardDir(dir string) { theGuard.send("dir", dir) }

// GuardHost asks the guard to undo one host change (see guardScript for the
// kinds) when the test binary ends.
func GuardHost(kind string, args ...string) { theGuard.send(kind, strings.Join(args, " ")) }

// GuardLock has the guard take an exclusive lock on path and waits until
// it holds it. The lock lasts until the guard ends, after the test binary.
func GuardLock(path string) error { return theGuard.lock(path) }
