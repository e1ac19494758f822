package plan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// TestReportDue walks a warm through the write pacing: progress waits the
// interval from its first change (a warm shorter than that is written
// once, as its result), a settled status goes out at once, a status equal
// to the report is never written, and after a write the next progress
// waits a full interval again.
func TestReportDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r Report
	r.Found(warmv1.NodeWarmStatus{})
	pulling := func(n int32) warmv1.NodeWarmStatus {
		return warmv1.NodeWarmStatus{Desired: 10, Present: 10 - n, Pulling: n}
	}
	done := warmv1.NodeWarmStatus{Desired: 10, Present: 10}
	steps := []struct {
		name   string
		at     time.Duration
		status warmv1.NodeWarmStatus
		write  bool // the caller writes when due
		due    bool
		wait   time.Duration
	}{
		{"pulls start: progress waits", 0, pulling(10), false, false, 2 * time.Second},
		{"more progress within the interval", 1500 * time.Millisecond, pulling(4), false, false, 500 * time.Millisecond},
		{"the warm ends: its result at once", 1800 * time.Millisecond, done, true, true, 0},
		{"nothing new", 2 * time.Second, done, false, false, 0},
		{"a new warm starts right after", 2100 * time.Millisecond, pulling(10), false, false, 2 * time.Second},
		{"progress an interval after its first change", 4100 * time.Millisecond, pulling(9), true, true, 0},
		{"the next progress waits a full interval from its change", 4200 * time.Millisecond, pulling(8), false, false, 2 * time.Second},
		{"back to what was written: nothing to write", 4300 * time.Millisecond, pulling(9), false, false, 0},
		{"a change again starts its own interval", 4400 * time.Millisecond, pulling(7), false, false, 2 * time.Second},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		wait, due := r.Due(s.status, now, Pacing{Interval: 2 * time.Second, Bytes: 30 * time.Second})
		if due != s.due || wait != s.wait {
			t.Fatalf("%s: Due = %v, %v; want %v, %v", s.name, wait, due, s.wait, s.due)
		}
		if s.write {
			r.Wrote(s.status, now)
		}
	}
}

// TestReportDueBytes: a status whose pulls' bytes alone moved waits the
// bytes interval from the last write, whatever else waits; never, when
// that interval is 0. Any other change is paced as before, and carries the
// bytes along.
func TestReportDueBytes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(done int64) warmv1.NodeWarmStatus {
		p := &warmv1.PullProgress{BytesDone: done, BytesTotal: 100}
		sum := &warmv1.NodePullProgress{PullProgress: *p}
		return warmv1.NodeWarmStatus{Desired: 2, Present: 1, Pulling: 1, PullProgress: sum, Progress: progressText(*sum),
			Images: []warmv1.NodeImage{{Image: "a", State: warmv1.ImagePulling, Progress: p}, {Image: "b", State: warmv1.ImagePresent}}}
	}
	pace := Pacing{Interval: 2 * time.Second, Bytes: 30 * time.Second}
	var r Report
	r.Wrote(at(10), t0)
	for _, s := range []struct {
		name string
		at   time.Duration
		st   warmv1.NodeWarmStatus
		pace Pacing
		due  bool
		wait time.Duration
	}{
		{"bytes moved: wait from the write", 5 * time.Second, at(40), pace, false, 25 * time.Second},
		{"bytes moved again: the same wait", 20 * time.Second, at(70), pace, false, 10 * time.Second},
		{"the bytes interval is over", 30 * time.Second, at(80), pace, true, 0},
		{"never for bytes alone", 31 * time.Second, at(90), Pacing{Interval: 2 * time.Second}, false, 0},
	} {
		wait, due := r.Due(s.st, t0.Add(s.at), s.pace)
		if due != s.due || wait != s.wait {
			t.Errorf("%s: Due = %v, %v; want %v, %v", s.name, wait, due, s.wait, s.due)
		}
	}
	other := at(90)
	other.Images[1].State = warmv1.ImageFailed
	if wait, due := r.Due(other, t0.Add(32*time.Second), pace); due || wait != 2*time.Second {
		t.Errorf("another change: Due = %v, %v; want the progress interval", wait, due)
	}
}

// TestReportDueServed: a status whose served counts alone moved waits the
// served pace since the last write, and is never written alone when that
// pace is 0; with the bytes moved too, the shorter pace decides.
func TestReportDueServed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(served int32, done int64) warmv1.NodeWarmStatus {
		p := &warmv1.PullProgress{BytesDone: done, BytesTotal: 100}
		return warmv1.NodeWarmStatus{Desired: 2, Present: 1, Pulling: 1, PullProgress: &warmv1.NodePullProgress{PullProgress: *p}, ServedStarts: served,
			Warms:  []warmv1.WarmRef{{Namespace: "a", Name: "w", Generation: 1, ServedStarts: served}},
			Images: []warmv1.NodeImage{{Image: "a", State: warmv1.ImagePulling, Progress: p}, {Image: "b", State: warmv1.ImagePresent}}}
	}
	pace := Pacing{Interval: 2 * time.Second, Bytes: 30 * time.Second, Served: 10 * time.Minute}
	var r Report
	r.Wrote(at(1, 10), t0)
	for _, s := range []struct {
		name string
		at   time.Duration
		st   warmv1.NodeWarmStatus
		pace Pacing
		due  bool
		wait time.Duration
	}{
		{"served moved: wait from the write", time.Minute, at(2, 10), pace, false, 9 * time.Minute},
		{"served and bytes moved: the bytes' pace", 20 * time.Second, at(2, 20), pace, false, 10 * time.Second},
		{"the served pace is over", 10 * time.Minute, at(3, 10), pace, true, 0},
		{"never for served alone", 11 * time.Minute, at(3, 10), Pacing{Interval: 2 * time.Second, Bytes: 30 * time.Second}, false, 0},
	} {
		wait, due := r.Due(s.st, t0.Add(s.at), s.pace)
		if due != s.due || wait != s.wait {
			t.Errorf("%s: Due = %v, %v; want %v, %v", s.name, wait, due, s.wait, s.due)
		}
	}
}

// TestReportDueRetries: an image written as failing (BackOff) whose retry
// starts, runs or fails alike is not news: such a status waits Retries
// from the last write, every retry folded into it. A retry that succeeds,
// or fails for another reason, is written as any change; with Retries 0
// every retry is.
func TestReportDueRetries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	img := func(state warmv1.ImageState, reason string, attempts int32, since time.Duration) warmv1.NodeImage {
		i := warmv1.NodeImage{Image: "r.io/a:v1", State: state, Reason: reason, Attempts: attempts, LastTransitionTime: at(since)}
		if reason != "" {
			i.Message = reason + " from the registry"
		}
		if state == warmv1.ImagePresent {
			i.LastTransitionTime = nil
		}
		if state == warmv1.ImageBackOff {
			i.RetryAt = at(since + 10*time.Second)
		}
		return i
	}
	status := func(a warmv1.NodeImage) warmv1.NodeWarmStatus {
		st := warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{a, {Image: "r.io/b:v1", State: warmv1.ImagePresent}}}
		count(&st)
		return st
	}
	failing := status(img(warmv1.ImageBackOff, "NotFound", 1, 0))
	pacing := Pacing{Interval: 2 * time.Second, Bytes: 30 * time.Second, Retries: time.Minute}
	for _, c := range []struct {
		name   string
		at     time.Duration
		status warmv1.NodeWarmStatus
		pacing Pacing
		due    bool
		wait   time.Duration
	}{
		{"the retry queued", 10 * time.Second, status(img(warmv1.ImageQueued, "", 1, 10*time.Second)), pacing, false, 50 * time.Second},
		{"the retry under way", 11 * time.Second, status(img(warmv1.ImagePulling, "", 1, 11*time.Second)), pacing, false, 49 * time.Second},
		{"the retry failed alike", 12 * time.Second, status(img(warmv1.ImageBackOff, "NotFound", 2, 12*time.Second)), pacing, false, 48 * time.Second},
		{"a minute after the write", 61 * time.Second, status(img(warmv1.ImageBackOff, "NotFound", 3, 50*time.Second)), pacing, true, 0},
		{"the retry succeeded", 12 * time.Second, status(img(warmv1.ImagePresent, "", 0, 0)), pacing, true, 0},
		{"the retry failed another way", 12 * time.Second, status(img(warmv1.ImageBackOff, "Unauthorized", 2, 12*time.Second)), pacing, true, 0},
		{"no folding", 12 * time.Second, status(img(warmv1.ImageBackOff, "NotFound", 2, 12*time.Second)), Pacing{Interval: 2 * time.Second}, true, 0},
	} {
		var r Report
		r.Wrote(failing, t0)
		if wait, due := r.Due(c.status, t0.Add(c.at), c.pacing); due != c.due || wait != c.wait {
			t.Errorf("%s: Due = %v, %v; want %v, %v", c.name, wait, due, c.wait, c.due)
		}
	}
}
