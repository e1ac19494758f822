package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// The planner's decisions, one input per case. Images are named fully so
// that the normalised reference is the name written.
const (
	imgA = "registry.test/team/a:v1"
	imgB = "registry.test/team/b:v1"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// runtimeImages is the runtime's image list, by normalised reference.
type runtimeImages map[string]pull.PresentImage

func (r runtimeImages) Lookup(ref imageref.Reference) (pull.PresentImage, bool) {
	pi, ok := r[ref.String()]
	return pi, ok
}

// testDigest is the repository digest of every image in these tests.
var testDigest = "sha256:" + strings.Repeat("d", 64)

func listed(keys ...string) runtimeImages {
	r := runtimeImages{}
	for _, k := range keys {
		r[k] = pull.PresentImage{ID: "sha256:id-" + k, RepoDigest: k + "@" + testDigest, Size: 1 << 20}
	}
	return r
}

// input makes a pass's input for a node wanting the ImageWarms' images,
// with the pass at t0 and the runtime listed just before.
func input(warms ...warmv1.ImageWarm) Input {
	d, _ := desiredImages("", nil, warms)
	return Input{
		Now: t0, ListedAt: t0.Add(-time.Millisecond), Desired: d, Runtime: runtimeImages{},
		Engine: map[string]pull.Status{}, Resync: time.Minute,
		Disk: pull.DiskUsage{Known: true, Mountpoint: "/var/lib/containerd", Percent: 40, ThresholdPercent: 80},
	}
}

func pulled(key string, finished time.Time) pull.Result {
	return pull.Result{Image: key, Ref: key, ImageRef: "sha256:id-" + key, Size: 1 << 20, Duration: time.Second, Attempts: 1, Finished: finished}
}

func failedPull(key string, class pull.Class, finished time.Time) pull.Result {
	return pull.Result{Image: key, Ref: key, Class: class, Message: "registry said no", Attempts: 1,
		Finished: finished, RetryAt: finished.Add(10 * time.Second)}
}

func backingOff(res pull.Result) pull.Status {
	return pull.Status{Image: res.Image, Ref: res.Ref, State: pull.StateBackOff, RetryAt: res.RetryAt, Last: &res, Tag: res.Tag}
}

func memory(m imageMemory) State {
	return State{images: map[string]imageMemory{imgA: m}}
}

// planCase is one decision: an input, and what must come out.
type planCase struct {
	name  string
	in    func() Input
	pulls []string // images to pull, in order
	state map[string]warmv1.ImageState
	// events are "Reason image" for image events, "Reason" for others.
	events []string
	check  func(t *testing.T, out Output)
}

// planFixtures are the ImageWarms the plan tables decide over.
type planFixtures struct {
	one, two, always, paused, private, waiting, admitted, stale warmv1.ImageWarm
}

func newPlanFixtures() planFixtures {
	one := warm("ns", "one", nil, imgA)
	two := warm("ns", "two", nil, imgA, imgB)
	always := warm("ns", "always", nil, imgA)
	always.Spec.PullPolicy = warmv1.PullAlways
	always.Spec.RefreshInterval = &metav1.Duration{Duration: time.Hour}
	paused := warm("ns", "paused", nil, imgA)
	paused.Spec.Suspend = true
	private := warm("ns", "private", nil, imgA)
	private.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	waiting := inRollout(warm("ns", "waiting", nil, imgA, imgB), 0)
	admitted := inRollout(warm("ns", "admitted", nil, imgA), warmv1.AdmitAll)
	stale := inRollout(warm("ns", "stale", nil, imgA), warmv1.AdmitAll)
	stale.Generation = 2 // the controller has not caught up

	return planFixtures{one: one, two: two, always: always, paused: paused, private: private, waiting: waiting, admitted: admitted, stale: stale}
}

// TestPlanPresence decides images as the runtime and the engine report
// them: missing, present, evicted, listed before or after a pull returned,
// no longer wanted.
func TestPlanPresence(t *testing.T) {
	fx := newPlanFixtures()
	runPlanCases(t, []planCase{{
		name:  "missing: pulled, queued",
		in:    func() Input { return input(fx.one) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued},
	}, {
		name: "credential providers: named in the status, by name only",
		in: func() Input {
			in := input(fx.one)
			in.Runtime = listed(imgA)
			in.CredentialProviders = []string{"ecr-fake", "acr-fake"}
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent},
		check: func(t *testing.T, out Output) {
			if !slices.Equal(out.Status.CredentialProviders, []string{"ecr-fake", "acr-fake"}) {
				t.Errorf("credentialProviders = %v; want [ecr-fake acr-fake] in the configuration's order", out.Status.CredentialProviders)
			}
		},
	}, {
		name: "present: left alone, and remembered as seen",
		in: func() Input {
			in := input(fx.one)
			in.Runtime = listed(imgA)
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent},
		check: func(t *testing.T, out Output) {
			if !out.State.images[imgA].seen {
				t.Error("a present image is not remembered as seen")
			}
		},
	}, {
		name: "evicted: seen before, gone now: an event, and pulled again",
		in: func() Input {
			in := input(fx.one)
			in.State = memory(imageMemory{seen: true, state: warmv1.ImagePresent})
			return in
		},
		pulls:  []string{imgA},
		state:  map[string]warmv1.ImageState{imgA: warmv1.ImageQueued},
		events: []string{"Evicted " + imgA},
		check: func(t *testing.T, out Output) {
			if out.Evictions != 1 {
				t.Errorf("%d evictions, want 1", out.Evictions)
			}
		},
	}, {
		name: "listed before its first pull returns: pulling, not present",
		in: func() Input {
			in := input(fx.one)
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling}
			in.Runtime = listed(imgA)
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePulling},
	}, {
		name: "pulled after the listing: present, and not pulled again",
		in: func() Input {
			in := input(fx.one)
			res := pulled(imgA, t0)
			res.Digest = imgA + "@" + testDigest
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulled, Last: &res}
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent},
		check: func(t *testing.T, out Output) {
			if img := out.Status.Images[0]; img.Digest != testDigest || img.LastTransitionTime != nil {
				t.Errorf("entry %+v: want the pull's digest, and no transition time", img)
			}
		},
	}, {
		name: "cancelled: nothing to tell",
		in: func() Input {
			in := input(fx.one)
			in.Results = []pull.Result{{Image: imgA, Ref: imgA, Class: pull.ClassCanceled, Finished: t0}}
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued},
	}, {
		name: "unwanted: forgotten, not pulled, its results dropped",
		in: func() Input {
			in := input()
			in.State = memory(imageMemory{seen: true, state: warmv1.ImagePresent})
			in.Results = []pull.Result{failedPull(imgA, pull.ClassNotFound, t0)}
			return in
		},
		check: func(t *testing.T, out Output) {
			if len(out.State.images) != 0 || len(out.Status.Images) != 0 {
				t.Errorf("an unwanted image is still remembered or reported")
			}
		},
	}})
}

// TestPlanRefresh decides pullPolicy Always: a present image is pulled
// again once its interval has passed, not before.
func TestPlanRefresh(t *testing.T) {
	fx := newPlanFixtures()
	runPlanCases(t, []planCase{{
		name: "refreshed: pullPolicy Always pulls a present image again once the interval has passed",
		in: func() Input {
			in := input(fx.always)
			in.Runtime = listed(imgA)
			in.State = memory(imageMemory{seen: true, state: warmv1.ImagePresent, refreshedAt: t0.Add(-61 * time.Minute)})
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent},
	}, {
		name: "not yet due: pullPolicy Always leaves a freshly pulled image alone",
		in: func() Input {
			in := input(fx.always)
			in.Runtime = listed(imgA)
			in.State = memory(imageMemory{seen: true, state: warmv1.ImagePresent, refreshedAt: t0.Add(-59 * time.Minute)})
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent},
	}})
}

// TestPlanFailures decides failed pulls: events, counts, back-off, a full
// disk, and missing credentials.
func TestPlanFailures(t *testing.T) {
	fx := newPlanFixtures()
	runPlanCases(t, perImageEvents([]planCase{{
		name: "failed: an event, a count, back-off with its reason, and the next pass when it ends",
		in: func() Input {
			in := input(fx.one)
			res := failedPull(imgA, pull.ClassNotFound, t0.Add(-time.Second))
			in.Results = []pull.Result{res}
			in.Engine[imgA] = backingOff(res)
			in.State = memory(imageMemory{state: warmv1.ImagePulling})
			return in
		},
		pulls:  []string{imgA},
		state:  map[string]warmv1.ImageState{imgA: warmv1.ImageBackOff},
		events: []string{"Failed " + imgA, "BackOff " + imgA},
		check: func(t *testing.T, out Output) {
			img := out.Status.Images[0]
			if img.Reason != "NotFound" || img.Attempts != 1 || !strings.Contains(img.Message, "registry said no") {
				t.Errorf("status %+v: want reason NotFound, 1 attempt and the message", img)
			}
			if want := t0.Add(9 * time.Second); img.RetryAt == nil || !img.RetryAt.Time.Equal(want) {
				t.Errorf("retryAt %v, want %v (when the back-off ends)", img.RetryAt, want)
			}
			if out.Next != 9*time.Second {
				t.Errorf("next pass in %v, want 9s (when the back-off ends)", out.Next)
			}
		},
	}, {
		name: "backing off: no second BackOff event while it lasts",
		in: func() Input {
			in := input(fx.one)
			res := failedPull(imgA, pull.ClassNotFound, t0.Add(-5*time.Second))
			in.Engine[imgA] = backingOff(res)
			in.State = memory(imageMemory{state: warmv1.ImageBackOff, failures: 1, failed: &res, taken: res.Finished})
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageBackOff},
	}, {
		name: "failed but listed: a pull that failed late left the image record; still not present",
		in: func() Input {
			in := input(fx.one)
			res := failedPull(imgA, pull.ClassErrImagePull, t0.Add(-time.Second))
			in.Results = []pull.Result{res}
			in.Engine[imgA] = backingOff(res)
			in.Runtime = listed(imgA)
			return in
		},
		pulls:  []string{imgA},
		state:  map[string]warmv1.ImageState{imgA: warmv1.ImageBackOff},
		events: []string{"Failed " + imgA, "BackOff " + imgA},
	}, {
		name: "failed but listed, the failure not yet reported: not present either",
		in: func() Input {
			in := input(fx.one)
			res := failedPull(imgA, pull.ClassErrImagePull, t0.Add(-time.Second))
			in.Engine[imgA] = backingOff(res)
			in.Runtime = listed(imgA)
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageBackOff},
		// The Failed event comes with the result, on the next pass.
		events: []string{"BackOff " + imgA},
	}, {
		name: "failed, then pulled: present again, attempts cleared",
		in: func() Input {
			in := input(fx.one)
			res := failedPull(imgA, pull.ClassNotFound, t0.Add(-time.Minute))
			in.State = memory(imageMemory{state: warmv1.ImageBackOff, failures: 3, failed: &res, taken: res.Finished})
			in.Results = []pull.Result{pulled(imgA, t0.Add(-time.Second))}
			in.Runtime = listed(imgA)
			return in
		},
		state:  map[string]warmv1.ImageState{imgA: warmv1.ImagePresent},
		events: []string{"Pulled " + imgA, warmv1.ReasonWarmed},
		check: func(t *testing.T, out Output) {
			if m := out.State.images[imgA]; m.failures != 0 || m.failed != nil {
				t.Errorf("memory %+v: want failures cleared", m)
			}
		},
	}, {
		name: "disk full: no new pull, failed with the reason; a running pull goes on",
		in: func() Input {
			in := input(fx.two)
			in.Disk = pull.DiskUsage{Known: true, Pressure: true, Mountpoint: "/var/lib/containerd", Percent: 95, ThresholdPercent: 80}
			in.Engine[imgB] = pull.Status{Image: imgB, Ref: imgB, State: pull.StatePulling}
			return in
		},
		pulls: []string{imgB},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageFailed, imgB: warmv1.ImagePulling},
		check: func(t *testing.T, out Output) {
			if img := out.Status.Images[0]; img.Reason != "DiskPressure" || !strings.Contains(img.Message, "95% full") {
				t.Errorf("status %+v: want DiskPressure and the level", img)
			}
			if out.Next != diskRetry {
				t.Errorf("next pass in %v, want %v", out.Next, diskRetry)
			}
		},
	}, {
		name: "unauthorized with a pull secret: the next pass soon, to try a fixed secret",
		in: func() Input {
			// The namespace names a secret: its entry is its own, and the
			// engine's reports carry its scope.
			in := input(fx.private)
			res := failedPull(imgA, pull.ClassUnauthorized, t0)
			res.RetryAt, res.Tag = t0.Add(5*time.Minute), "ns"
			in.Engine[imgA] = backingOff(res)
			in.State = State{images: map[string]imageMemory{entryKey(imgA, "ns"): {state: warmv1.ImageBackOff, failures: 4, failed: &res, taken: t0}}}
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageBackOff},
		check: nextPassIn(secretRetry),
	}}))
}

// TestPlanRollout decides images under a rollout and under suspend: not
// pulled until admitted, a pull under way goes on.
func TestPlanRollout(t *testing.T) {
	fx := newPlanFixtures()
	runPlanCases(t, []planCase{{
		name:  "rollout: not admitted yet, not pulled, queued with WaitingForRollout",
		in:    func() Input { return input(fx.waiting) },
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued, imgB: warmv1.ImageQueued},
		check: reasonOf(imgA, warmv1.ReasonWaitingForRollout),
	}, {
		name:  "rollout: admitted, pulled",
		in:    func() Input { return input(fx.admitted) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued},
		check: reasonOf(imgA, ""),
	}, {
		name:  "rollout: a bound for an older spec does not admit",
		in:    func() Input { return input(fx.stale) },
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued},
		check: reasonOf(imgA, warmv1.ReasonWaitingForRollout),
	}, {
		name:  "rollout: one ImageWarm that admits the node is enough; the other image waits",
		in:    func() Input { return input(fx.waiting, fx.admitted) },
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageQueued, imgB: warmv1.ImageQueued},
		check: reasonOf(imgB, warmv1.ReasonWaitingForRollout),
	}, {
		name: "rollout: a present image stays present while the node waits",
		in: func() Input {
			in := input(fx.waiting)
			in.Runtime = listed(imgA)
			return in
		},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePresent, imgB: warmv1.ImageQueued},
	}, {
		name: "rollout: a pull under way when a new rollout starts goes on",
		in: func() Input {
			in := input(fx.waiting)
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling}
			return in
		},
		pulls: []string{imgA},
		state: map[string]warmv1.ImageState{imgA: warmv1.ImagePulling, imgB: warmv1.ImageQueued},
	}, {
		name:  "suspended: skipped, not pulled",
		in:    func() Input { return input(fx.paused) },
		state: map[string]warmv1.ImageState{imgA: warmv1.ImageSkipped},
	}})
}

// perImageEvents runs cases with --per-image-events: they check the
// per-image Failed and BackOff events (failures_test.go the summed-up
// ones) and a next pass that no summed-up event's settling brings
// forward.
func perImageEvents(cases []planCase) []planCase {
	for i := range cases {
		in := cases[i].in
		cases[i].in = func() Input {
			x := in()
			x.PerImageEvents = true
			return x
		}
	}
	return cases
}

// runPlanCases runs a table of decisions.
func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkPlan(t, c, decide(c.in()))
		})
	}
}

func checkPlan(t *testing.T, c planCase, out Output) {
	t.Helper()
	var pulls []string
	for _, p := range out.Pulls {
		pulls = append(pulls, p.Image)
	}
	if !slices.Equal(pulls, c.pulls) {
		t.Errorf("pulls %q, want %q", pulls, c.pulls)
	}
	for _, img := range out.Status.Images {
		if want, ok := c.state[img.Image]; ok && img.State != want {
			t.Errorf("%s: state %s, want %s", img.Image, img.State, want)
		}
	}
	if got := eventNames(out.Events); !slices.Equal(got, c.events) {
		t.Errorf("events %q, want %q", got, c.events)
	}
	if c.check != nil {
		c.check(t, out)
	}
}

// eventNames names events as "Reason image" (image events) or "Reason".
func eventNames(events []Event) []string {
	var out []string
	for _, e := range events {
		name := e.Reason
		if img, ok := strings.CutPrefix(e.Action, ActionPull+" "); ok {
			name += " " + img
		}
		out = append(out, name)
	}
	return out
}

// TestPlanWarmedOnce forces the interleaving that sent two Warmed events
// each saying "pulled 1": the runtime lists both images of an ImageWarm
// while the engine's result for the second has not reached the agent.
// One Warmed event must follow, counting both pulls.
func TestPlanWarmedOnce(t *testing.T) {
	two := warm("ns", "two", nil, imgA, imgB)
	resA, resB := pulled(imgA, t0.Add(-2*time.Second)), pulled(imgB, t0.Add(-time.Second))

	// Pass 1: A's result is in; B's pull has ended in the engine, but its
	// report is still on its way. Both are listed.
	in := input(two)
	in.Started = []StartedPull{{Key: imgA, At: t0.Add(-3 * time.Second)}, {Key: imgB, At: t0.Add(-3 * time.Second)}}
	in.Results = []pull.Result{resA}
	in.Engine[imgB] = pull.Status{Image: imgB, Ref: imgB, State: pull.StatePulled, Last: &resB}
	in.Runtime = listed(imgA, imgB)
	first := decide(in)
	if got := eventNames(first.Events); len(got) != 0 {
		t.Fatalf("pass 1 events %q: Warmed before every result is in", got)
	}
	for _, img := range first.Status.Images {
		if img.State != warmv1.ImagePresent {
			t.Errorf("pass 1: %s is %s, want Present", img.Image, img.State)
		}
	}

	// Pass 2: B's report arrives.
	in = input(two)
	in.Now = t0.Add(10 * time.Millisecond)
	in.State = first.State
	in.Results = []pull.Result{resB}
	in.Runtime = listed(imgA, imgB)
	second := decide(in)
	if got := eventNames(second.Events); !slices.Equal(got, []string{warmv1.ReasonWarmed}) {
		t.Fatalf("pass 2 events %q, want one Warmed", got)
	}
	if note := second.Events[0].Note; !strings.Contains(note, "pulled 2 (2097152 bytes)") {
		t.Errorf("Warmed says %q, want both pulls counted", note)
	}

	// Pass 3: nothing new: nothing said.
	in.State, in.Results = second.State, nil
	if got := eventNames(decide(in).Events); len(got) != 0 {
		t.Errorf("pass 3 events %q, want none", got)
	}
}

// TestPlanTransitionTimes checks that a state's transition time is when it
// began, not when it was last seen.
func TestPlanTransitionTimes(t *testing.T) {
	in := input(warm("ns", "one", nil, imgA))
	first := decide(in)
	in.State, in.Now = first.State, t0.Add(time.Minute)
	second := decide(in)
	if got := second.Status.Images[0].LastTransitionTime.Time; !got.Equal(t0) {
		t.Errorf("Queued since %v, want %v", got, t0)
	}
	in.State, in.Now, in.Runtime = second.State, t0.Add(2*time.Minute), listed(imgA)
	third := decide(in)
	if got := third.State.images[imgA].since.Time; !got.Equal(t0.Add(2*time.Minute)) || third.Status.Images[0].LastTransitionTime != nil {
		t.Errorf("Present since %v, reported %v; want %v, not reported", got, third.Status.Images[0].LastTransitionTime, t0.Add(2*time.Minute))
	}
}

// TestPlanInvalid checks that an image that does not parse is reported
// failed, beside the others.
func TestPlanInvalid(t *testing.T) {
	out := decide(input(warm("ns", "bad", nil, imgA, "Not A Valid:Ref")))
	var reasons []string
	for _, img := range out.Status.Images {
		reasons = append(reasons, fmt.Sprintf("%s %s %s", img.Image, img.State, img.Reason))
	}
	want := []string{"Not A Valid:Ref Failed InvalidImageName", imgA + " Queued "}
	if !slices.Equal(reasons, want) {
		t.Errorf("images %q, want %q", reasons, want)
	}
}

// TestPlanSiblingPull checks the Warmed count when an image arrives by
// another spelling's pull (the engine finishes a digest its tag's pull
// brought without pulling, Attempts 0): the ImageWarm is warmed, and
// counts no pull and no bytes for it.
func TestPlanSiblingPull(t *testing.T) {
	in := input(warm("ns", "one", nil, imgA))
	res := pulled(imgA, t0)
	res.Attempts = 0
	in.Results = []pull.Result{res}
	in.Runtime = listed(imgA)
	out := decide(in)
	if got := eventNames(out.Events); !slices.Equal(got, []string{warmv1.ReasonWarmed}) {
		t.Fatalf("events %q, want one Warmed", got)
	}
	if note := out.Events[0].Note; !strings.Contains(note, "pulled 0 (0 bytes)") {
		t.Errorf("Warmed says %q, want no pull counted", note)
	}
	if out.Pulls != nil {
		t.Errorf("pulls %v, want none", out.Pulls)
	}
}

// nextPassIn checks that the plan asks for its next pass in d.
func nextPassIn(d time.Duration) func(*testing.T, Output) {
	return func(t *testing.T, out Output) {
		t.Helper()
		if out.Next != d {
			t.Errorf("next pass in %v, want %v", out.Next, d)
		}
	}
}

// TestPlanTooManyImages asks a node for more images than a NodeWarm
// lists: the list is cut, the counts cover every image, and a condition
// says so; back under the limit, the condition goes.
func TestPlanTooManyImages(t *testing.T) {
	var warms []warmv1.ImageWarm
	var all []string
	for w := range 6 {
		var imgs []string
		for i := range 100 {
			imgs = append(imgs, fmt.Sprintf("registry.test/w%d/i%03d:v1", w, i))
		}
		all = append(all, imgs...)
		warms = append(warms, warm("ns", fmt.Sprintf("w%d", w), nil, imgs...))
	}
	in := input(warms...)
	in.Runtime = listed(all...)
	out := decide(in)
	st := out.Status
	if len(st.Images) != warmv1.MaxNodeImages || st.Desired != 600 || st.Present != 600 {
		t.Fatalf("%d listed, desired %d, present %d; want %d listed, 600 desired and present", len(st.Images), st.Desired, st.Present, warmv1.MaxNodeImages)
	}
	c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionImagesListed)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != warmv1.ReasonTooManyImages || !strings.Contains(c.Message, "600 images") {
		t.Fatalf("condition %+v, want ImagesListed False TooManyImages counting 600", c)
	}

	in = input(warms[:5]...)
	in.Runtime, in.State, in.Conditions = listed(all...), out.State, st.Conditions
	st = decide(in).Status
	if len(st.Images) != 500 || meta.FindStatusCondition(st.Conditions, warmv1.ConditionImagesListed) != nil {
		t.Fatalf("%d listed with conditions %+v; want 500 and no ImagesListed", len(st.Images), st.Conditions)
	}
}

// inRollout gives iw a rollout of one node at a time whose bound, for
// iw's generation, is below: 0 admits no node, AdmitAll every node.
func inRollout(iw warmv1.ImageWarm, below int64) warmv1.ImageWarm {
	one := intstr.FromInt32(1)
	iw.Spec.Rollout = &warmv1.Rollout{MaxPulling: &one}
	iw.Status.Rollout = &warmv1.RolloutStatus{Generation: iw.Generation, AdmittedBelow: below}
	return iw
}

// reasonOf checks the reason an image is reported with.
func reasonOf(image, reason string) func(*testing.T, Output) {
	return func(t *testing.T, out Output) {
		t.Helper()
		for _, img := range out.Status.Images {
			if img.Image == image && img.Reason != reason {
				t.Errorf("%s: reason %q, want %q", image, img.Reason, reason)
			}
		}
	}
}

// TestBadSecretReportedOnce checks that a pull secret the shell could not
// read is reported in the pass that read it, once per problem: the same
// problem again is not reported, a new problem after a fix is.
func TestBadSecretReportedOnce(t *testing.T) {
	private := warm("ns", "private", nil, imgA)
	private.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	regcred := types.NamespacedName{Namespace: "ns", Name: "regcred"}
	notFound := map[types.NamespacedName]string{regcred: `pull secret "regcred" not found in namespace "ns"`}
	pass := func(in Input, reads map[types.NamespacedName]string) Output {
		out := decide(in)
		out.Applied(reads, "")
		return out
	}
	in := input(private)
	out := pass(in, notFound)
	if got := eventNames(out.Events); !slices.Equal(got, []string{"InvalidPullSecret"}) {
		t.Fatalf("events %q, want InvalidPullSecret", got)
	}
	if len(out.Events[0].Subjects) != 1 || out.Events[0].Subjects[0].Name != "private" {
		t.Errorf("subjects %+v, want the ImageWarm that names the secret", out.Events[0].Subjects)
	}
	in.State = out.State
	if again := pass(in, notFound); len(again.Events) != 0 {
		t.Errorf("the same problem reported again: %v", eventNames(again.Events))
	}
	fixed := pass(in, map[types.NamespacedName]string{regcred: ""})
	in.State = fixed.State
	if again := pass(in, map[types.NamespacedName]string{regcred: "broken again"}); len(again.Events) != 1 {
		t.Errorf("a new problem after a fix: %v, want one event", eventNames(again.Events))
	}
}

// TestPinFailureSamePass checks that a pin the shell could not make turns
// the Pinning condition False in the status of the same pass.
func TestPinFailureSamePass(t *testing.T) {
	in := input(pinnedWarm("pinned", imgA))
	in.Runtime = listed(imgA)
	in.Pins.Mine = map[string]bool{}
	out := decide(in)
	if !slices.Equal(out.Pins, []string{imgA}) {
		t.Fatalf("pins %v, want %s", out.Pins, imgA)
	}
	out.Applied(nil, "pinning "+imgA+": images.Update: unavailable")
	c := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionPinning)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != warmv1.ReasonPinFailed || !strings.Contains(c.Message, "unavailable") {
		t.Errorf("Pinning %+v, want False %s with the failure", c, warmv1.ReasonPinFailed)
	}
}

// TestPlanLevelUnknown checks what a pass says when the image filesystem's
// level cannot be read: DiskPressure Unknown, a Warning on the Node once
// each time it starts, and, when the guard holds pulls (the engine then
// reports Pressure without a level), images waiting with the reason.
func TestPlanLevelUnknown(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprintf("held %v", held), func(t *testing.T) {
			in := input(warm("ns", "one", nil, imgA))
			in.Disk = pull.DiskUsage{Pressure: held}
			out := decide(in)
			c := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionDiskPressure)
			if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != warmv1.ReasonLevelUnknown ||
				strings.Contains(c.Message, "held back until") != held {
				t.Errorf("DiskPressure %+v, want Unknown %s saying whether pulls are held", c, warmv1.ReasonLevelUnknown)
			}
			if len(out.Events) != 1 || out.Events[0].Reason != warmv1.ReasonLevelUnknown || !out.Events[0].OnNode || !out.Events[0].Warning {
				t.Errorf("events %+v, want one Warning %s on the Node", out.Events, warmv1.ReasonLevelUnknown)
			}
			if got := len(out.Pulls) == 0; got != held {
				t.Errorf("pulls %v with held %v", out.Pulls, held)
			}
			if img := out.Status.Images[0]; held && (img.Reason != warmv1.ReasonDiskPressure || !strings.Contains(img.Message, "cannot read the image filesystem's level")) {
				t.Errorf("held image %+v, want DiskPressure saying the level cannot be read", img)
			}
			in.Conditions, in.State = out.Status.Conditions, out.State
			if again := decide(in); len(again.Events) != 0 {
				t.Errorf("the warning again on the next pass: %v", eventNames(again.Events))
			}
			in.Disk = pull.DiskUsage{Known: true, Mountpoint: "/var/lib/containerd", Percent: 40, ThresholdPercent: 80}
			known := decide(in)
			in.Conditions, in.Disk = known.Status.Conditions, pull.DiskUsage{Pressure: held}
			if again := decide(in); len(again.Events) != 1 {
				t.Errorf("unknown again after a reading: %v, want the warning again", eventNames(again.Events))
			}
		})
	}
}

// decide is Decide for the tables written before entries were verified:
// every image the runtime lists counts as one this agent already pulled,
// under each entry's credentials, unless the case's state says otherwise.
// The verification itself is tested in credentials_test.go, with Decide.
func decide(in Input) Output { return Decide(trusted(in)) }

// trusted marks the runtime's images as verified for every entry that
// wants them and has no verification in its memory.
func trusted(in Input) Input {
	rt, ok := in.Runtime.(runtimeImages)
	if !ok {
		return in
	}
	images := maps.Clone(in.State.images)
	if images == nil {
		images = map[string]imageMemory{}
	}
	for key, w := range in.Desired.images {
		li, listed := rt[w.refKey]
		m := images[key]
		if listed && m.verifiedID == "" && m.verifiedDigest == "" {
			m.verifiedID = li.ID
			images[key] = m
		}
	}
	in.State.images = images
	return in
}

// TestPlanFairShare: one namespace asking for more images than a NodeWarm
// lists does not push another namespace's out of the report: the entries
// are taken in turn by namespace.
func TestPlanFairShare(t *testing.T) {
	var greedy []string
	for i := range 600 {
		greedy = append(greedy, fmt.Sprintf("registry.test/big/i%03d:v1", i))
	}
	small := []string{"registry.test/zz/one:v1", "registry.test/zz/two:v1"}
	in := input(warm("big", "all", nil, greedy...), warm("small", "few", nil, small...))
	in.Runtime = listed(append(greedy, small...)...)
	st := decide(in).Status
	if len(st.Images) != warmv1.MaxNodeImages || st.Desired != 602 {
		t.Fatalf("%d listed, %d desired; want %d and 602", len(st.Images), st.Desired, warmv1.MaxNodeImages)
	}
	for _, img := range small {
		if !slices.ContainsFunc(st.Images, func(e warmv1.NodeImage) bool { return e.Image == img }) {
			t.Errorf("%s, small's image, was pushed out of the report by big's 600", img)
		}
	}
	if !slices.IsSortedFunc(st.Images, func(a, b warmv1.NodeImage) int { return strings.Compare(a.Image, b.Image) }) {
		t.Error("the report is not sorted by image")
	}
}
