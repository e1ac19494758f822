package artifacts

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed"
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
	files := volumes(t, c.ImageService(t), c.RuntimeService(t), c.Dir, c.Log, testbed.PauseImage,
		map[string]string{"/model": art.Ref, "/data": img.Ref})
	if files["/data"] == 0 {
		t.Fatalf("the image's volume holds nothing (%v): the check cannot tell", files)
	}
	if files["/model"] != 0 {
		t.Errorf("the artifact's volume holds %d entries: containerd 2 mounts artifacts, ArtifactsUnsupported is wrong there", files["/model"])
	}
}

// volumes pulls the mounts' references, creates a pod with the host's
// network and a container of image (already on the runtime) with those
// image volumes (container
// path to reference), and counts the entries each volume's host path
// holds. The pod is removed at cleanup.
func volumes(t *testing.T, is runtimeapi.ImageServiceClient, rs runtimeapi.RuntimeServiceClient, dir string,
	logs func(int) string, image string, mounts map[string]string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ms []*runtimeapi.Mount
	for path, ref := range mounts {
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		ms = append(ms, &runtimeapi.Mount{ContainerPath: path, Image: &runtimeapi.ImageSpec{Image: ref}, Readonly: true})
	}
	sbc := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "vol", Namespace: "default", Uid: "vol-uid"},
		LogDirectory: filepath.Join(dir, "logs"),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
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
			Image: &runtimeapi.ImageSpec{Image: image}, LogPath: "c.log", Mounts: ms}})
	if err != nil {
		t.Fatalf("CreateContainer: %v\n%s", err, logs(30))
	}
	t.Cleanup(func() {
		_, _ = rs.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: ctr.ContainerId})
	})
	st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.ContainerId})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]int{}
	for _, m := range st.GetStatus().GetMounts() {
		entries, err := os.ReadDir(m.GetHostPath())
		if err != nil {
			t.Fatalf("reading the volume %s at %s: %v", m.GetContainerPath(), m.GetHostPath(), err)
		}
		t.Logf("%s from %s: %d entries", m.GetContainerPath(), m.GetHostPath(), len(entries))
		files[m.GetContainerPath()] = len(entries)
	}
	return files
}
