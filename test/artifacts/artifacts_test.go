// Package artifacts warms OCI artifacts (spec.artifacts), the model
// weights Pods mount as image volumes, on the test bed's real runtimes: a
// small artifact the bed builds (testbed.PushArtifact) is warmed on CRI-O,
// which mounts artifacts, and refused with ArtifactsUnsupported on
// containerd 1.6 and 2, which do not, while the ImageWarm's image warms.
// TestRuntimesOnArtifacts records what each runtime's CRI does with an
// artifact, TestContainerd2ImageVolumes what containerd 2 mounts of one,
// and TestCRIOImageVolumes that a container on CRI-O sees a warmed
// artifact's files: the facts the agent's decisions rest on.
package artifacts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const ns = "models"

// artifactOptions make a small artifact: two blobs of 2 MB.
var artifactOptions = testbed.ArtifactOptions{Blobs: 2, BlobSize: 2 * testbed.MB}

// warmWith is an ImageWarm of one image and one artifact.
func warmWith(name string, image, artifact testbed.Image) *warmv1.ImageWarm {
	iw := build.ImageWarm(ns, name, build.Images(image.Ref))
	iw.Spec.Artifacts = []warmv1.ImageReference{warmv1.ImageReference(artifact.Ref)}
	return iw
}

// TestArtifactsOnCRIO: CRI-O warms three artifacts beside an image,
// one artifact at a time (CRI-O keeps one of those pulled side by side):
// the runtime holds them afterwards, the NodeWarm says present, the
// ImageWarm is Ready, and each was pulled once.
func TestArtifactsOnCRIO(t *testing.T) {
	const node = "crio-art"
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "art"})
	img := reg.PushRandom(t, "apps/small:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	iw := build.ImageWarm(ns, "models", build.Images(img.Ref))
	refs := []string{img.Ref}
	for i := range 3 {
		art := reg.PushArtifact(t, fmt.Sprintf("models/m%d:v1", i), artifactOptions)
		iw.Spec.Artifacts = append(iw.Spec.Artifacts, warmv1.ImageReference(art.Ref))
		refs = append(refs, art.Ref)
	}
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{CRIO: true})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	f.Create(t, iw)
	waitReady(t, f, "models", 2*time.Minute)
	n := f.Nodes[node]
	if err := n.AllPresent(t, refs...); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 30*time.Second, "the artifacts present in the NodeWarm", func() error { return presentIn(f, node, refs...) })
	// Still present a few passes later: the runtime's listing of an
	// artifact (an ID and digest of CRI-O's own) counts as the pull's.
	time.Sleep(3 * f.AgentSettings.Resync)
	if err := presentIn(f, node, refs...); err != nil {
		t.Errorf("after three passes: %v", err)
	}
	if got := n.Metric(t, "warmer_image_pulls_total", `result="success"`); got != 4 {
		t.Errorf("%v successful pulls, want 4 (the image and the artifacts, once each)", got)
	}
}

// presentIn is nil once the node's NodeWarm says each ref present.
func presentIn(f *testbed.Fleet, node string, refs ...string) error {
	for _, ref := range refs {
		got, err := f.NodeImage(node, ref)
		if err != nil {
			return err
		}
		if got.State != warmv1.ImagePresent {
			return fmt.Errorf("%s: %+v", ref, got)
		}
	}
	return nil
}

// TestArtifactsOnContainerd: containerd 1.6 and 2 refuse the artifact
// with ArtifactsUnsupported, pull nothing of it, and warm the image of
// the same ImageWarm; the nodes count as unsupported, not failed.
func TestArtifactsOnContainerd(t *testing.T) {
	versions := testbed.ContainerdVersions()
	nodes := map[string]map[string]string{}
	byNode := map[string]testbed.ContainerdVersion{}
	names := []string{"art-16", "art-2"}
	for i, v := range versions {
		nodes[names[i]], byNode[names[i]] = nil, v
	}
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "art"})
	art := reg.PushArtifact(t, "models/tiny:v1", artifactOptions)
	img := reg.PushRandom(t, "apps/small:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	f := testbed.StartFleet(t, nodes, testbed.FleetOptions{
		Containerd: func(node string) []testbed.ContainerdOption { return byNode[node].Options(t) },
	})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	f.Create(t, warmWith("tiny", img, art))
	for _, node := range names {
		t.Run(byNode[node].Name, func(t *testing.T) {
			testbed.Eventually(t, time.Minute, "the image warm and the artifact refused", func() error {
				if err := f.Nodes[node].AllPresent(t, img.Ref); err != nil {
					return err
				}
				got, err := f.NodeImage(node, art.Ref)
				if err != nil {
					return err
				}
				if got.State != warmv1.ImageFailed || got.Reason != warmv1.ReasonArtifactsUnsupported ||
					!strings.Contains(got.Message, "cannot mount artifacts") {
					return fmt.Errorf("artifact %+v", got)
				}
				return nil
			})
			if f.Nodes[node].Present(t, art.Ref) {
				t.Errorf("the runtime holds the artifact: it was pulled")
			}
		})
	}
	testbed.Eventually(t, time.Minute, "both nodes unsupported and one Failed event each", func() error {
		iw := f.ImageWarm(t, ns, "tiny")
		if c := iw.Status.Nodes; c.Unsupported != 2 || c.Failed != 0 {
			return fmt.Errorf("nodes %+v, want 2 unsupported, none failed", c)
		}
		evs := f.Events(t, ns, "tiny", warmv1.ReasonFailed)
		for _, e := range evs {
			if !strings.Contains(e.Note, warmv1.ReasonArtifactsUnsupported) {
				return fmt.Errorf("a Failed event without the reason: %q", e.Note)
			}
		}
		if len(evs) != 2 {
			return fmt.Errorf("%d Failed events, want one per node", len(evs))
		}
		return nil
	})
	// No retry: a few passes later nothing was pulled again.
	before := pulls(t, f, names)
	time.Sleep(3 * f.AgentSettings.Resync)
	if after := pulls(t, f, names); after != before {
		t.Errorf("%v pull attempts after the refusal settled, %v before: the artifact is retried", after, before)
	}
}

// pulls sums the pull attempts of the nodes' agents, any result.
func pulls(t *testing.T, f *testbed.Fleet, names []string) float64 {
	var n float64
	for _, node := range names {
		n += f.Nodes[node].Metric(t, "warmer_image_pulls_total")
	}
	return n
}

func waitReady(t *testing.T, f *testbed.Fleet, name string, within time.Duration) {
	t.Helper()
	testbed.Eventually(t, within, name+" Ready", func() error {
		c := meta.FindStatusCondition(f.ImageWarm(t, ns, name).Status.Conditions, warmv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	})
}

// noLayers checks that containerd 2's record of the artifact has no
// layer to mount: no chain ID, no diff IDs. Its blobs are not layers, so
// an image volume of it would be an empty snapshot.
func noLayers(ctx context.Context, t *testing.T, c runtimeapi.ImageServiceClient, ref string) {
	t.Helper()
	st, err := c.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		ChainID   string `json:"chainID"`
		ImageSpec struct {
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		} `json:"imageSpec"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("containerd's verbose image info %q: %v", st.GetInfo()["info"], err)
	}
	if info.ChainID != "" || len(info.ImageSpec.RootFS.DiffIDs) != 0 {
		t.Errorf("containerd 2 records layers for the artifact (chain %q, diff IDs %v): an image volume of it may hold files", info.ChainID, info.ImageSpec.RootFS.DiffIDs)
	}
}

// TestRuntimesOnArtifacts records what each runtime's CRI does with an
// artifact, the facts the agent's decisions rest on: CRI-O pulls it and
// reports it (pinned), but of artifacts pulled side by side keeps one;
// containerd 1.6 fails the pull after recording it; containerd 2 pulls it
// and lists it, with no layer (none of its blobs is one), so no CRI
// answer on containerd says "artifact".
func TestRuntimesOnArtifacts(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "art"})
	art := reg.PushArtifact(t, "models/tiny:v1", artifactOptions)
	type outcome struct {
		pullErr string // a fragment of the pull's error; "" for success
		pinned  bool
	}
	want := map[string]outcome{
		"containerd 1.6": {pullErr: "mismatched image rootfs and manifest layers"},
		"containerd 2":   {},
		"cri-o":          {pinned: true},
	}
	crio := testbed.StartCRIO(t, "crio").ImageService(t)
	clients := map[string]runtimeapi.ImageServiceClient{"cri-o": crio}
	for _, v := range testbed.ContainerdVersions() {
		clients[v.Name] = testbed.StartContainerd(t, strings.ReplaceAll(v.Name, " ", ""), v.Options(t)...).ImageService(t)
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := c.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: art.Ref}})
			w := want[name]
			switch {
			case w.pullErr == "" && err != nil:
				t.Errorf("pull: %v, want success", err)
			case w.pullErr != "" && (err == nil || !strings.Contains(err.Error(), w.pullErr)):
				t.Errorf("pull: %v, want an error saying %q", err, w.pullErr)
			}
			st, err := c.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: art.Ref}})
			if err != nil || st.GetImage() == nil {
				t.Fatalf("ImageStatus after the pull: %v, %v: want the artifact listed", st, err)
			}
			if st.GetImage().GetPinned() != w.pinned {
				t.Errorf("pinned %v, want %v", st.GetImage().GetPinned(), w.pinned)
			}
			if name == "containerd 2" {
				noLayers(ctx, t, c, art.Ref)
			}
		})
	}
	t.Run("cri-o keeps one of the artifacts pulled side by side", func(t *testing.T) {
		var refs []string
		for i := range 4 {
			refs = append(refs, reg.PushArtifact(t, fmt.Sprintf("models/side%d:v1", i), artifactOptions).Ref)
		}
		var wg sync.WaitGroup
		for _, ref := range refs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := crio.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
					t.Errorf("pull %s: %v", ref, err)
				}
			})
		}
		wg.Wait()
		kept := 0
		for _, ref := range refs {
			st, err := crio.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			if err != nil {
				t.Fatal(err)
			}
			if st.GetImage() != nil {
				kept++
			}
		}
		if kept == len(refs) {
			t.Errorf("CRI-O kept all %d artifacts pulled side by side: the agent's one-at-a-time rule (plan/artifacts.go) may go", kept)
		}
		t.Logf("CRI-O kept %d of %d artifacts pulled side by side, every pull succeeding", kept, len(refs))
	})
}
