package testbed

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

const nodeChildEnv = "WARMER_TESTBED_NODE_STATE"

// nodeState is what the child running a real node reports.
type nodeState struct {
	Traces Traces
	// Changed are the sysctls the kubelet changed, proof that restoring
	// them is tested.
	Changed []string
	// Mounts are the mounts below the node's directories while it runs.
	Mounts []string
	// Shims are containerd's shim processes, outside every process group
	// the test bed started.
	Shims []int
	// Preset are sysctls the child moved off the kubelet's values before
	// its node started, with the values to write back once the guard is
	// checked.
	Preset map[string]string
}

// kubeletPanic is the value the kubelet gives kernel/panic.
const kubeletPanic = "10"

// TestRealNodeNoTraceWhenKilled kills, with SIGKILL, a test binary running
// a real node with a pod, and checks that the guard undoes everything: no
// process (the kubelet, containerd, its shims, the pod's containers), no
// mount, directory, cgroup, address or log link stays, and the kubelet's
// sysctls are back. The ordinary stop is tested by test/cluster, whose
// TestMain checks the same after its shared node stops.
func TestRealNodeNoTraceWhenKilled(t *testing.T) {
	if path := os.Getenv(nodeChildEnv); path != "" {
		nodeChild(t, path)
		return
	}
	state := filepath.Join(t.TempDir(), "state.json")
	child := exec.Command(os.Args[0], "-test.run=^TestRealNodeNoTraceWhenKilled$", "-test.v")
	child.Env = append(os.Environ(), nodeChildEnv+"="+state)
	logPath := filepath.Join(t.TempDir(), "child.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	// A failure before the kill below must not leave the child's node
	// running (its guard undoes the node once the child is gone).
	t.Cleanup(func() { _ = child.Process.Kill(); <-exited })
	var s nodeState
	// The child may first wait for another test binary's node.
	deadline := time.Now().Add(15 * time.Minute)
	for {
		if b, err := os.ReadFile(state); err == nil && json.Unmarshal(b, &s) == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the child ended before reporting its node; log:\n%s", tailFile(logPath, 40))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			t.Fatalf("the child never reported its node; log:\n%s", tailFile(logPath, 40))
		}
	}
	t.Cleanup(func() {
		if err := writeSysctls(s.Preset); err != nil {
			t.Error(err)
		}
	})
	if len(s.Changed) == 0 || len(s.Mounts) == 0 || len(s.Shims) == 0 {
		t.Fatalf("the child's node changed too little to test the guard: %+v", s)
	}
	_ = child.Process.Kill()
	<-exited

	deadline = time.Now().Add(time.Minute)
	for {
		left := LeftBehind(s.Traces)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after SIGKILL:\n  %s", strings.Join(left, "\n  "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nodeChild starts a node with a running pod, reports it and waits to be
// killed.
func nodeChild(t *testing.T, path string) {
	preset := presetKubeletPanic(t)
	n := StartNode(t, NodeOptions{Name: "killed-node"})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			Containers: []corev1.Container{{
				Name: "sleeper", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	ctx := context.Background()
	if err := n.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	Poll(t, 100*time.Millisecond, 2*time.Minute, "the pod running", func() error {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return &phaseError{pod.Status.Phase}
		}
		return nil
	})
	s := nodeState{Traces: n.Traces(), Shims: ProcsMentioning(n.Containerd.Socket), Preset: preset}
	now, _ := ReadSysctls(KubeletSysctls)
	for k, v := range s.Traces.Sysctls {
		if now[k] != v {
			s.Changed = append(s.Changed, k)
		}
	}
	for _, d := range s.Traces.Dirs {
		m, _ := mountsBelow(d)
		s.Mounts = append(s.Mounts, m...)
	}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Rename(path+".tmp", path)
	select {} // until killed
}

// presetKubeletPanic makes sure the kubelet has a sysctl to change: a host
// that already has its values (left, say, by a guard killed together with
// its test binary) would leave the guard's write-back untested. Holding
// the node lock, it moves kernel/panic off the kubelet's value and returns
// what to write back after the test.
func presetKubeletPanic(t *testing.T) map[string]string {
	if err := hostcheck.GuardLock(nodeLock); err != nil {
		t.Fatalf("waiting for the machine's real node: %v", err)
	}
	now, err := ReadSysctls([]string{"kernel/panic"})
	if err != nil {
		t.Fatal(err)
	}
	if now["kernel/panic"] != kubeletPanic {
		return nil
	}
	if err := writeSysctls(map[string]string{"kernel/panic": "0"}); err != nil {
		t.Fatal(err)
	}
	return now
}

type phaseError struct{ phase corev1.PodPhase }

func (e *phaseError) Error() string { return "pod phase " + string(e.phase) }
