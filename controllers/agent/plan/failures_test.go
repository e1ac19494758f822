package plan

import (
	"strings"
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// failuresPass runs one pass at now with the given results and engine
// statuses, from the previous pass's state.
func failuresPass(prev State, now time.Time, engine map[string]pull.Status, results ...pull.Result) Output {
	in := input(newPlanFixtures().two, newPlanFixtures().one)
	in.Now, in.ListedAt, in.State, in.Results = now, now, prev, results
	for k, s := range engine {
		in.Engine[k] = s
	}
	return decide(in)
}

// summedFailures are the pass's summed-up Failed events, by ImageWarm.
func summedFailures(t *testing.T, out Output) map[string]Event {
	t.Helper()
	got := map[string]Event{}
	for _, e := range out.Events {
		if e.Reason != warmv1.ReasonFailed {
			continue
		}
		if !strings.HasPrefix(e.Action, ActionPullFailures+" #") || len(e.warms) != 1 {
			t.Errorf("Failed event %+v: want the summed-up one, on one ImageWarm", e)
			continue
		}
		got[e.warms[0].Name] = e
	}
	return got
}

// TestFailuresFold sums failures per ImageWarm: one Failed event each,
// once the set of failing images held still for failureSettle, counting
// them by reason and naming them; nothing while a failing image is
// retried or fails again the same way; a new event when the set changes;
// and at most failureWaitMax of waiting for a set that keeps changing.
func TestFailuresFold(t *testing.T) {
	fail := func(img string, class pull.Class, at time.Time) (pull.Result, pull.Status) {
		res := failedPull(img, class, at)
		return res, backingOff(res)
	}
	resA, stA := fail(imgA, pull.ClassNotFound, t0)
	resB, stB := fail(imgB, pull.ClassNotFound, t0)
	engine := map[string]pull.Status{imgA: stA, imgB: stB}

	out := failuresPass(State{}, t0, engine, resA, resB)
	if got := summedFailures(t, out); len(got) != 0 {
		t.Errorf("events %v as the failures come in, want none yet", got)
	}
	if out.Next > failureSettle {
		t.Errorf("next pass in %v, want within %v to tell the failures", out.Next, failureSettle)
	}

	out = failuresPass(out.State, t0.Add(failureSettle), engine)
	got := summedFailures(t, out)
	if len(got) != 2 {
		t.Fatalf("events %v, want one Failed for each ImageWarm", eventNames(out.Events))
	}
	if n := got["two"].Note; !strings.Contains(n, "2 of 2 images failed to pull (NotFound 2)") || !strings.Contains(n, imgA) || !strings.Contains(n, imgB) {
		t.Errorf("two's note %q: want both images counted by reason and named", n)
	}
	if n := got["one"].Note; !strings.Contains(n, "1 of 1 images failed to pull (NotFound 1)") || !strings.Contains(n, "registry said no") {
		t.Errorf("one's note %q: want its image with the registry's message", n)
	}
	told := got["two"].Action

	// Retried, and failing again the same way: nothing new.
	retry := map[string]pull.Status{imgA: {Image: imgA, Ref: imgA, State: pull.StatePulling}, imgB: stB}
	out = failuresPass(out.State, t0.Add(20*time.Second), retry)
	out = failuresPass(out.State, t0.Add(40*time.Second), retry)
	if got := summedFailures(t, out); len(got) != 0 {
		t.Errorf("events %v while a failing image is retried, want none", eventNames(out.Events))
	}
	resA2, stA2 := fail(imgA, pull.ClassNotFound, t0.Add(41*time.Second))
	engine = map[string]pull.Status{imgA: stA2, imgB: stB}
	out = failuresPass(out.State, t0.Add(41*time.Second), engine, resA2)
	out = failuresPass(out.State, t0.Add(50*time.Second), engine)
	if got := summedFailures(t, out); len(got) != 0 {
		t.Errorf("events %v after the same failure again, want none", eventNames(out.Events))
	}

	// B fails otherwise now: two's set changed, one's did not.
	resB2, stB2 := fail(imgB, pull.ClassUnauthorized, t0.Add(60*time.Second))
	engine = map[string]pull.Status{imgA: stA2, imgB: stB2}
	out = failuresPass(out.State, t0.Add(60*time.Second), engine, resB2)
	out = failuresPass(out.State, t0.Add(60*time.Second+failureSettle), engine)
	got = summedFailures(t, out)
	if e, ok := got["two"]; len(got) != 1 || !ok || !strings.Contains(e.Note, "(NotFound 1, Unauthorized 1)") || e.Action == told {
		t.Errorf("events %+v, want two's alone, a new series saying NotFound 1, Unauthorized 1", got)
	}

	// A set that keeps changing is told within failureWaitMax.
	start := t0.Add(2 * time.Minute)
	classes := []pull.Class{pull.ClassNotFound, pull.ClassRegistryUnavailable} // neither the set told
	told = ""
	for i := 0; i <= int(failureWaitMax/(2*time.Second)); i++ {
		now := start.Add(time.Duration(i) * 2 * time.Second)
		res, st := fail(imgB, classes[i%2], now)
		engine[imgB] = st
		out = failuresPass(out.State, now, engine, res)
		if e, ok := summedFailures(t, out)["two"]; ok {
			told = e.Note
			if now.Sub(start) > failureWaitMax {
				t.Errorf("told after %v, want within %v", now.Sub(start), failureWaitMax)
			}
			break
		}
	}
	if told == "" {
		t.Errorf("a set changing every 2s never told")
	}
}

// TestFailuresNoteBound keeps the note within an event's bound however
// long the images' names and messages are, naming the first few, each
// message keeping its end (the cause).
func TestFailuresNoteBound(t *testing.T) {
	f := &failureFold{images: 100}
	for i := range 50 {
		f.failed = append(f.failed, failedImage{image: strings.Repeat("x", 500) + string(rune('a'+i%26)), reason: "NotFound", message: strings.Repeat("m", 240) + " THE-CAUSE"})
	}
	n := failuresNote(f)
	if len(n)+253 > MaxEventNote || !strings.Contains(n, "50 of 100 images failed to pull (NotFound 50)") || !strings.Contains(n, "and 47 more") ||
		strings.Count(n, "THE-CAUSE") != maxFailuresNamed {
		t.Errorf("note of %d bytes %q: want under %d with the node's name, the counts, each named image's cause and how many more", len(n), n, MaxEventNote)
	}
}

// TestRetrySaysItsFailure: the retry of a failing pull, under way, keeps
// the failure it retries in its entry (reason and message), so the
// ImageWarm counts the node as failed for that reason until the retry
// ends, not as pulling.
func TestRetrySaysItsFailure(t *testing.T) {
	in := verifyingInput(warm("ns", "app", nil, imgA))
	refused := failedPull(imgA, pull.ClassUnauthorized, t0.Add(-time.Minute))
	in.Results = []pull.Result{refused}
	in.Engine[imgA] = backingOff(refused)
	first := Decide(in)
	in.State, in.Now, in.Results = first.State, t0.Add(time.Second), nil
	in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling, Last: &refused}
	e := entry(t, Decide(in).Status, "")
	if e.State != warmv1.ImagePulling || e.Reason != string(pull.ClassUnauthorized) || e.Message == "" || e.Attempts != 1 {
		t.Errorf("retry under way: %+v; want Pulling, saying Unauthorized, after 1 attempt", e)
	}
}
