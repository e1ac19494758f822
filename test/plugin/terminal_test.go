package plugin

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// The slowed warm the terminal follows: one node pulling two
// images of 8 MB over one link of 1 MB/s, about 16 s: under the 30 s
// --pull-progress-interval that once made such a pull show no movement.
const (
	linkRate   = 1 << 20
	liveImages = 2
	liveSize   = 8 * testbed.MB
)

// TestLiveInTmux runs kubectl warmer status --watch as warmer-viewer in a
// real terminal (tmux) while a real agent pulls over a rate-limited
// link, reads the screen with capture-pane every quarter second, and
// checks what a person would see: bars whose bytes move, then Ready, and
// exit 0.
func TestLiveInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: hack/install-testbed-deps.sh installs it")
	}
	// Built first: the warm must not run on while it compiles.
	bin := testbed.BuildGo(t, "./cmd/kubectl-warmer")
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	link := faults.StartLinkProxy(t, reg.Host, linkRate)
	var refs []string
	for i := range liveImages {
		img := reg.PushRandom(t, fmt.Sprintf("live/app%d:v1", i), testbed.ImageOptions{LayerSize: liveSize})
		refs = append(refs, strings.Replace(img.Ref, reg.Host, link.Host, 1))
	}
	// The agent's default --pull-progress-interval (30 s): one node pulling
	// fleet-wide writes its bytes every 2 s all the same (plan.BytesPace).
	f := testbed.StartFleet(t, map[string]map[string]string{"node-live": nil}, testbed.FleetOptions{})
	grantViewer(t, f.CP, viewer)
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}})
	f.Create(t, build.ImageWarm("live", "app", build.Images(refs...)))
	// After the watch, the same terminal under NO_COLOR: plain text, no
	// live view.
	args := fmt.Sprintf("status app -n live --kubeconfig %s --as %s", f.CP.Kubeconfig, viewer)
	tm := startTmux(t, fmt.Sprintf("%s %s --watch --timeout=3m; echo EXIT=$?; NO_COLOR=1 %s %s; echo PLAIN=$?; sleep 600",
		bin, args, bin, args))
	frames := tm.follow(t, 3*time.Minute, "PLAIN=")
	last := frames[len(frames)-1]
	if !strings.Contains(last, "PLAIN=0") || !strings.Contains(last, "[##############################] 1 of 1 nodes warm") {
		t.Errorf("under NO_COLOR, want the plain bar and exit 0; last frame:\n%s", last)
	}
	t.Logf("%d distinct frames; the last:\n%s", len(frames), last)
	if !strings.Contains(last, "EXIT=0") || !strings.Contains(last, "live/app: Ready") {
		t.Fatalf("want Ready and exit 0 at the end; last frame:\n%s", last)
	}
	left := bytesLeft(frames)
	t.Logf("node-live's bytes left as the screen showed them, in order: %v", left)
	if len(left) < 3 {
		t.Errorf("the node's bar showed %d distinct byte counts, want it to move (3 or more):\n%s", len(left), strings.Join(frames, "\n----\n"))
	}
	for i := 1; i < len(left); i++ {
		if left[i] > left[i-1] {
			t.Errorf("bytes left grew from %v to %v", left[i-1], left[i])
		}
	}
	for _, fr := range frames {
		if strings.Contains(fr, "\x1b") {
			t.Errorf("capture-pane without -e shows an escape sequence:\n%q", fr)
		}
	}
}

// tmux is one tmux server of the test's own (its own socket).
type tmux struct{ sock string }

func startTmux(t *testing.T, command string) *tmux {
	t.Helper()
	tm := &tmux{sock: filepath.Join(t.TempDir(), "tmux.sock")}
	if out, err := tm.cmd("new-session", "-d", "-x", "120", "-y", "30", command).CombinedOutput(); err != nil {
		t.Fatalf("starting tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = tm.cmd("kill-server").Run() })
	return tm
}

func (tm *tmux) cmd(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...)
}

// follow captures the pane every 250 ms until it shows end, returning
// each distinct screen in order.
func (tm *tmux) follow(t *testing.T, timeout time.Duration, end string) []string {
	t.Helper()
	var frames []string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		out, err := tm.cmd("capture-pane", "-p").Output()
		if err != nil {
			t.Fatalf("capture-pane: %v", err)
		}
		screen := strings.TrimRight(string(out), "\n")
		if len(frames) == 0 || frames[len(frames)-1] != screen {
			frames = append(frames, screen)
		}
		if strings.Contains(screen, end) {
			return frames
		}
	}
	t.Fatalf("no %q after %v; the screen:\n%s", end, timeout, frames[len(frames)-1])
	return nil
}

var nodeBytes = regexp.MustCompile(`node-live .*Pulling\s+([0-9.]+ (?:B|KiB|MiB)) of ([0-9.]+ (?:B|KiB|MiB))`)

// bytesLeft are the distinct counts of bytes left node-live's row
// showed, in order (the bytes of its pulls under way: an image done
// leaves the count).
func bytesLeft(frames []string) []float64 {
	var out []float64
	for _, fr := range frames {
		m := nodeBytes.FindStringSubmatch(fr)
		if m == nil {
			continue
		}
		v := parseIEC(m[2]) - parseIEC(m[1])
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

func parseIEC(s string) float64 {
	unit := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}
	n, u, _ := strings.Cut(s, " ")
	v, _ := strconv.ParseFloat(n, 64)
	return v * unit[u]
}
