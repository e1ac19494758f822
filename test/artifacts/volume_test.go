package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestContainerd2ImageVolumes creates, through CRI alone (no kubelet), a
// container on containerd 2 with two image volumes, an image and an
// artifact, and reads what each mounts: the image's files, and nothing
// of the artifact's.
func TestContainerd2ImageVolumes(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "art"})
	art := reg.PushArtifact(t, "models/tiny:v1", artifactOptions)
	img := reg.PushRandom(t, "data/files:v1", testbed.ImageOptions{LayerSize: 64 << 10})
	c := testbed.StartContainerd(t, "vol2", testbed.WithContainerd2(t))
	tar := testbed.WriteImageTar(t, testbed.GoImage(t, "./test/testbed/pause"), testbed.PauseImage, c.Dir)
	if err := c.ImportImage(tar); err != nil {
		t.Fatalf("importing the pause image: %v", err)
	}
	pull(t, c.ImageService(t), art.Ref, img.Ref)
	rs := c.RuntimeService(t)
	id := createContainer(t, rs, c.Dir, c.Log, testbed.PauseImage, map[string]string{"/model": art.Ref, "/data": img.Ref})
	files := volumes(t, rs, id)
	if files["/data"] == 0 {
		t.Fatalf("the image's volume holds nothing (%v): the check cannot tell", files)
	}
	if files["/model"] != 0 {
		t.Errorf("the artifact's volume holds %d entries: containerd 2 mounts artifacts, ArtifactsUnsupported is wrong there", files["/model"])
	}
}

// TestCRIOImageVolumes: warmer's agent warms an artifact and an image on
// CRI-O (with the bed's pause stand-in, CRI-O's pause image and the
// container's); then, with the registry stopped so that nothing can be
// pulled again, a pod and a container started through CRI alone mount
// both as image volumes. Inside the container the artifact's volume holds
// each of its blobs as a file of the name the blob carries, with the
// bytes pushed, and the image's volume holds the image's files; of an
// artifact whose blobs carry no name, nothing is mounted.
func TestCRIOImageVolumes(t *testing.T) {
	const node = "crio-vol"
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "art"})
	art := reg.PushArtifact(t, "models/tiny:v1", artifactOptions)
	untitled := artifactOptions
	untitled.Untitled = true
	bare := reg.PushArtifact(t, "models/bare:v1", untitled)
	img := reg.PushRandom(t, "data/files:v1", testbed.ImageOptions{LayerSize: 64 << 10})
	pause := reg.Push(t, "pause:v1", testbed.GoImage(t, "./test/testbed/pause"))
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{CRIO: true,
		CRIOOpts: func(string) []testbed.CRIOOption {
			return []testbed.CRIOOption{testbed.WithPauseImage(pause.Ref), testbed.WithOverlayStorage()}
		}})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	iw := build.ImageWarm(ns, "vol", build.Images(img.Ref, pause.Ref))
	iw.Spec.Artifacts = []warmv1.ImageReference{warmv1.ImageReference(art.Ref), warmv1.ImageReference(bare.Ref)}
	f.Create(t, iw)
	waitReady(t, f, "vol", 2*time.Minute)
	reg.Stop()

	crio := f.Nodes[node].CRIO
	rs := crio.RuntimeService(t)
	id := createContainer(t, rs, crio.Dir, crio.Log, pause.Ref, map[string]string{"/model": art.Ref, "/bare": bare.Ref, "/data": img.Ref})
	if files := volumes(t, rs, id); files["/model"] != len(art.Files) || files["/data"] == 0 {
		t.Errorf("the container's status lists %v: want %d files at /model, one a blob, and the image's at /data", files, len(art.Files))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v\n%s", err, crio.Log(30))
	}
	root := fmt.Sprintf("/proc/%d/root", containerPID(ctx, t, rs, id))
	if entries, err := os.ReadDir(filepath.Join(root, "data")); err != nil || len(entries) == 0 {
		t.Errorf("the image's volume in the container: %d entries, %v", len(entries), err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "model"))
	if err != nil {
		t.Fatalf("the artifact's volume in the container: %v\n%s", err, crio.Log(30))
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := slices.Sorted(maps.Keys(art.Files)); !slices.Equal(names, want) {
		t.Fatalf("the artifact's volume holds %v, want %v", names, want)
	}
	for name, digest := range art.Files {
		if got := fileDigest(t, filepath.Join(root, "model", name)); got != digest {
			t.Errorf("/model/%s in the container has digest %s, the blob pushed %s", name, got, digest)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "bare")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the artifact whose blobs carry no file name: /bare in the container: %v, want no such path (CRI-O mounts no unnamed blob)", err)
	}
}

// pull pulls refs through CRI.
func pull(t *testing.T, is runtimeapi.ImageServiceClient, refs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ref := range refs {
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
	}
}

// createContainer runs a pod with the host's network and creates in it a
// container of image (already on the runtime) with image volumes (container
// path to reference, each already on the runtime). Its PID namespace is
// the container's own, as the kubelet asks unless a pod shares one: on
// CRI-O that pod has no infra process (see testbed.CRIO). The pod is
// removed at cleanup; the container's ID is returned.
func createContainer(t *testing.T, rs runtimeapi.RuntimeServiceClient, dir string, logs func(int) string,
	image string, mounts map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ms []*runtimeapi.Mount
	for path, ref := range mounts {
		ms = append(ms, &runtimeapi.Mount{ContainerPath: path, Readonly: true,
			Image: &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: ref}})
	}
	sbc := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "vol", Namespace: "default", Uid: "vol-uid"},
		LogDirectory: filepath.Join(dir, "logs"),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE,
				Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbc})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\n%s", err, logs(30))
	}
	t.Cleanup(func() {
		_, _ = rs.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
		_, _ = rs.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
	})
	ctr, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbc,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Image: &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}, LogPath: "c.log", Mounts: ms,
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: sbc.Linux.SecurityContext.NamespaceOptions}}}})
	if err != nil {
		t.Fatalf("CreateContainer: %v\n%s", err, logs(30))
	}
	t.Cleanup(func() {
		_, _ = rs.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: ctr.ContainerId, Timeout: 5})
		_, _ = rs.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: ctr.ContainerId})
	})
	return ctr.ContainerId
}

// volumes counts, from the container's status, the entries each volume's
// host path holds: a folder's entries, or one for a file (CRI-O lists an
// artifact's volume once per blob, each a file).
func volumes(t *testing.T, rs runtimeapi.RuntimeServiceClient, id string) map[string]int {
	t.Helper()
	st, err := rs.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]int{}
	for _, m := range st.GetStatus().GetMounts() {
		fi, err := os.Stat(m.GetHostPath())
		if err != nil {
			t.Fatalf("the volume %s at %s: %v", m.GetContainerPath(), m.GetHostPath(), err)
		}
		n := 1
		if fi.IsDir() {
			entries, err := os.ReadDir(m.GetHostPath())
			if err != nil {
				t.Fatalf("reading the volume %s at %s: %v", m.GetContainerPath(), m.GetHostPath(), err)
			}
			n = len(entries)
		}
		t.Logf("%s from %s: %d entries", m.GetContainerPath(), m.GetHostPath(), n)
		files[m.GetContainerPath()] += n
	}
	return files
}

// containerPID is the running container's process as the host sees it,
// from the runtime's verbose status.
func containerPID(ctx context.Context, t *testing.T, rs runtimeapi.RuntimeServiceClient, id string) int {
	t.Helper()
	st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		t.Fatalf("no PID in the verbose status %q: %v", st.GetInfo()["info"], err)
	}
	return info.Pid
}

// fileDigest is a file's sha256 digest, "sha256:...".
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
