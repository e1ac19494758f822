package plan

import (
	"strings"
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

var (
	crio       = warmv1.RuntimeInfo{Name: "cri-o", Version: "1.34.0"}
	containerd = warmv1.RuntimeInfo{Name: "containerd", Version: "v2.4.2"}
)

// withArtifacts is the ImageWarm with refs in spec.artifacts.
func withArtifacts(iw warmv1.ImageWarm, refs ...string) warmv1.ImageWarm {
	for _, r := range refs {
		iw.Spec.Artifacts = append(iw.Spec.Artifacts, warmv1.ImageReference(r))
	}
	return iw
}

// on is the input with the node's runtime set.
func on(rt warmv1.RuntimeInfo, in Input) Input {
	in.RuntimeInfo = rt
	return in
}

// waits checks that ref's entry says it waits for another artifact.
func waits(ref string) func(*testing.T, Output) {
	return func(t *testing.T, out Output) {
		t.Helper()
		for _, img := range out.Status.Images {
			if img.Image == ref && img.Message != artifactWaitStatus {
				t.Errorf("%s: %+v, want it waiting for the other artifact", ref, img)
			}
		}
	}
}

// TestPlanArtifacts decides spec.artifacts: pulled where the runtime
// mounts artifacts (CRI-O), one at a time, refused for good elsewhere
// without taking the ImageWarm's images down, and an artifact listed also
// as an image counts as an artifact.
func TestPlanArtifacts(t *testing.T) {
	models := withArtifacts(warm("ns", "models", nil, imgA), imgB)
	plain := warm("ns", "plain", nil, imgB)
	refused := func(t *testing.T, out Output) {
		t.Helper()
		for _, img := range out.Status.Images {
			if img.Image != imgB {
				continue
			}
			if img.Reason != warmv1.ReasonArtifactsUnsupported || !strings.Contains(img.Message, "containerd v2.4.2") || img.RetryAt != nil {
				t.Errorf("artifact %+v: want reason %s naming the runtime, no retry", img, warmv1.ReasonArtifactsUnsupported)
			}
		}
	}
	runPlanCases(t, []planCase{{
		name:  "CRI-O: the artifact is pulled with the image",
		in:    func() Input { return on(crio, input(models)) },
		pulls: []string{imgA, imgB},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued, imgB: warmv1.ImageQueued},
	}, {
		name: "CRI-O: a listed artifact pulled by the agent is present",
		in: func() Input {
			in := on(crio, input(models))
			in.Runtime = listed(imgA, imgB)
			in.State = State{images: map[string]imageMemory{
				imgA: {verifiedID: "sha256:id-" + imgA}, imgB: {verifiedID: "sha256:id-" + imgB}}}
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent, imgB: warmv1.ImagePresent},
	}, {
		name:  "CRI-O: two artifacts, one pulled at a time",
		in:    func() Input { return on(crio, input(withArtifacts(warm("ns", "two", nil), imgA, imgB))) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued, imgB: warmv1.ImageQueued},
		check: waits(imgB),
	}, {
		name: "CRI-O: the artifact under way keeps its turn",
		in: func() Input {
			in := on(crio, input(withArtifacts(warm("ns", "two", nil), imgA, imgB)))
			in.Engine[imgB] = pull.Status{Image: imgB, Ref: imgB, State: pull.StatePulling}
			return in
		},
		pulls: []string{imgB},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued, imgB: warmv1.ImagePulling},
		check: waits(imgA),
	}, {
		name:  "containerd: the image is pulled, the artifact is refused",
		in:    func() Input { return on(containerd, input(models)) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued, imgB: warmv1.ImageFailed},
		check: refused,
	}, {
		name: "containerd: refused even when the runtime lists it, and the image warm",
		in: func() Input {
			in := on(containerd, input(models))
			in.Runtime = listed(imgA, imgB)
			in.State = State{images: map[string]imageMemory{imgA: {verifiedID: "sha256:id-" + imgA}}}
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent, imgB: warmv1.ImageFailed},
		check: refused,
	}, {
		name: "containerd: a pull of it under way (it was an image) is not asked for again",
		in: func() Input {
			in := on(containerd, input(models))
			in.Engine[imgB] = pull.Status{Image: imgB, Ref: imgB, State: pull.StatePulling}
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgB: warmv1.ImageFailed},
	}, {
		name:  "containerd: an artifact of one ImageWarm, an image of another: an artifact",
		in:    func() Input { return on(containerd, input(models, plain)) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgB: warmv1.ImageFailed},
	}, {
		name:  "runtime not named yet: queued, not pulled",
		in:    func() Input { return input(models) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgB: warmv1.ImageQueued},
	}})
	t.Run("the refusal is one Failed event, not repeated", func(t *testing.T) {
		in := on(containerd, input(models))
		first := decide(in)
		in.State = first.State
		in.Now = in.Now.Add(10 * time.Minute)
		later := decide(in)
		in.State = later.State
		in.Now = in.Now.Add(10 * time.Minute)
		last := decide(in)
		all := append(append(eventNames(first.Events), eventNames(later.Events)...), eventNames(last.Events)...)
		failed := 0
		for _, e := range all {
			if strings.HasPrefix(e, warmv1.ReasonFailed) {
				failed++
			}
		}
		if failed != 1 {
			t.Errorf("events over three passes %q: want one Failed", all)
		}
	})
}
