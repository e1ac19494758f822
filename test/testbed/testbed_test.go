package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPullsThroughCRI is the test bed's self test: real containerd pulls the
// generated images from the real registries, anonymously and with
// credentials, and refuses what it should refuse.
func TestPullsThroughCRI(t *testing.T) {
	regs := StartRegistries(t)
	cat := regs.LoadCatalog(t, false)
	ctd := StartContainerd(t, "node-a")
	cri := ctd.ImageService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, img := range []Image{cat.Small, cat.Medium, cat.Layered, cat.MultiArch} {
		if _, err := cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img.Ref}}); err != nil {
			t.Fatalf("anonymous pull of %s: %v", img.Ref, err)
		}
	}
	_, err := cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: cat.Private.Ref}})
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Fatalf("pull of a private image without credentials: want 401, got %v", err)
	}
	auth := &runtimeapi.AuthConfig{Username: regs.Auth.Username(), Password: regs.Auth.Password()}
	if _, err := cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: cat.Private.Ref}, Auth: auth}); err != nil {
		t.Fatalf("authenticated pull of %s: %v", cat.Private.Ref, err)
	}
	_, err = cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: cat.ArmOnly.Ref}})
	if err == nil || !strings.Contains(err.Error(), "no match for platform") {
		t.Fatalf("pull of an arm64-only index: want no match for platform, got %v", err)
	}

	list, err := cri.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, img := range list.Images {
		for _, tag := range img.RepoTags {
			present[tag] = true
		}
		for _, d := range img.RepoDigests {
			present[d] = true
		}
	}
	for _, img := range []Image{cat.Small, cat.Medium, cat.Layered, cat.MultiArch, cat.Private} {
		repo := img.Ref[:strings.LastIndexByte(img.Ref, ':')]
		if !present[img.Ref] || !present[repo+"@"+img.Digest] {
			t.Errorf("%s (%s) not listed by the runtime: %v", img.Ref, img.Digest, present)
		}
	}
	if present[cat.ArmOnly.Ref] {
		t.Errorf("the arm64-only image is listed")
	}
}

const leakChildEnv = "WARMER_TESTBED_LEAK_STATE"

// leakState is what the child reports of what it started.
type leakState struct {
	Pids  []int
	Ports []string
	Dirs  []string
}

// TestNoLeakWhenKilled kills, with SIGKILL, a test binary that has a whole
// test bed up, and checks that nothing it started survives it: no process,
// no open port, no directory, no mount.
//
// The child is this same test in another process: with leakChildEnv set, it
// brings the test bed up, reports it and waits to be killed.
func TestNoLeakWhenKilled(t *testing.T) {
	if path := os.Getenv(leakChildEnv); path != "" {
		leakChild(t, path)
		return
	}
	state := filepath.Join(t.TempDir(), "state.json")
	child := exec.Command(os.Args[0], "-test.run=^TestNoLeakWhenKilled$", "-test.v")
	child.Env = append(os.Environ(), leakChildEnv+"="+state)
	out, err := os.Create(filepath.Join(t.TempDir(), "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var s leakState
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(state); err == nil && json.Unmarshal(b, &s) == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			t.Fatalf("the child never reported its test bed; log:\n%s", tailFile(out.Name(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(s.Pids) < 4 {
		t.Fatalf("the child reported too few processes: %+v", s)
	}
	_ = child.Process.Kill()
	_ = child.Wait()

	waitGone(t, s)
}

func waitGone(t *testing.T, s leakState) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := leftovers(s)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after SIGKILL: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func leftovers(s leakState) []string {
	var left []string
	for _, pid := range s.Pids {
		// Signal 0 checks existence; a zombie reparented to init counts as gone
		// once reaped, which init does promptly.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			left = append(left, "pid "+strconv.Itoa(pid))
		}
	}
	for _, addr := range s.Ports {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			left = append(left, "port "+addr)
		}
	}
	for _, d := range s.Dirs {
		if m, _ := mountsBelow(d); len(m) > 0 {
			left = append(left, "mounts "+strings.Join(m, ","))
		}
		if _, err := os.Stat(d); err == nil {
			left = append(left, "dir "+d)
		}
	}
	return left
}

// leakChild brings a test bed up, writes what it started to path and waits
// to be killed.
func leakChild(t *testing.T, path string) {
	reg := StartRegistry(t, RegistryOptions{Name: "leak"})
	img := reg.PushRandom(t, "leak/app:v1", ImageOptions{LayerSize: 4 * MB})
	ctd := StartContainerd(t, "leak-node")
	if _, err := ctd.ImageService(t).PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img.Ref}}); err != nil {
		t.Fatal(err)
	}
	s := leakState{
		Pids:  []int{reg.proc.cmd.Process.Pid, ctd.proc.cmd.Process.Pid},
		Ports: []string{reg.Host},
		Dirs:  []string{reg.dir, ctd.Dir},
	}
	cp := StartControlPlane(t)
	s.Pids = append(s.Pids, childrenRunning(mustEval(t, os.Getenv("KUBEBUILDER_ASSETS")))...)
	s.Ports = append(s.Ports, strings.TrimPrefix(cp.Config.Host, "https://"))
	s.Dirs = append(s.Dirs, envtestDirs(cp.env)...)
	b, _ := json.Marshal(s)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Rename(path+".tmp", path)
	select {} // until killed
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestMirror checks that WithMirror sends a docker.io pull to the test
// registry, as the sandbox relies on.
func TestMirror(t *testing.T) {
	reg := StartRegistry(t, RegistryOptions{Name: "mirror"})
	img := reg.PushRandom(t, "library/busybox:1.36", ImageOptions{LayerSize: MB})
	ctd := StartContainerd(t, "node-m", WithMirror("docker.io", reg.Host))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := ctd.ImageService(t).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"}})
	if err != nil {
		t.Fatalf("pull through the mirror: %v", err)
	}
	st, err := ctd.ImageService(t).ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.ImageRef}})
	if err != nil || st.Image == nil {
		t.Fatalf("status of the pulled image: %v", err)
	}
	want := "docker.io/library/busybox@" + img.Digest
	if len(st.Image.RepoDigests) != 1 || st.Image.RepoDigests[0] != want {
		t.Fatalf("repo digests %v, want [%s]", st.Image.RepoDigests, want)
	}
}
