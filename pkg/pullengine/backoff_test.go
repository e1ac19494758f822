package pullengine

import (
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	errNotFoundCRI = status.Error(codes.NotFound, "failed to resolve reference: not found")
	err401         = status.Error(codes.Unknown, "pulling from host reg.local failed with status code [manifests v1]: 401 Unauthorized")
)

func keyringFor(t *testing.T, creds ...Credential) *Keyring {
	t.Helper()
	k := NewKeyring()
	if err := k.Add(creds...); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestBackOffGrowsToCap(t *testing.T) {
	h := newHarness(t, Options{})
	ref := key(t, "a")
	h.svc.failWith(ref, errNotFoundCRI, errNotFoundCRI, errNotFoundCRI, errNotFoundCRI, errNotFoundCRI, errNotFoundCRI, errNotFoundCRI)
	for _, want := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
		want *= time.Second
		if st := h.enqueue("a", 0); st.State != pull.StateQueued {
			t.Fatalf("before the %v back-off: %s", want, st.State)
		}
		res := h.result(t)
		if res.Class != pull.ClassNotFound || !res.RetryAt.Equal(h.clock.Now().Add(want)) {
			t.Fatalf("got %s retry in %v, want NotFound retry in %v", res.Class, res.RetryAt.Sub(h.clock.Now()), want)
		}
		st := h.enqueue("a", 0)
		if st.State != pull.StateBackOff || !st.RetryAt.Equal(res.RetryAt) || st.Last == nil || st.Last.Class != pull.ClassNotFound {
			t.Fatalf("during back-off: %+v", st)
		}
		if s, _ := h.eng.Status("a"); s.State != pull.StateBackOff {
			t.Fatalf("Status during back-off: %s", s.State)
		}
		h.clock.Step(want - time.Second)
		if st := h.enqueue("a", 0); st.State != pull.StateBackOff {
			t.Fatalf("a second before the end of back-off: %s", st.State)
		}
		h.clock.Step(time.Second)
	}
	if got := len(h.svc.pulled()); got != 7 {
		t.Fatalf("%d pulls, want 7", got)
	}
}

func TestBackOffResetOnSuccess(t *testing.T) {
	h := newHarness(t, Options{BackOffInitial: time.Second, BackOffMax: time.Minute})
	ref := key(t, "a")
	h.svc.failWith(ref, errNotFoundCRI)
	h.enqueue("a", 0)
	if res := h.result(t); !res.RetryAt.Equal(h.clock.Now().Add(time.Second)) {
		t.Fatalf("first failure: retry at %v", res.RetryAt)
	}
	h.clock.Step(time.Second)
	h.enqueue("a", 0)
	if res := h.result(t); !res.Succeeded() || !res.RetryAt.IsZero() {
		t.Fatalf("second attempt: %+v", res)
	}
	h.svc.failWith(ref, errNotFoundCRI)
	h.enqueue("a", 0)
	if res := h.result(t); !res.RetryAt.Equal(h.clock.Now().Add(time.Second)) {
		t.Fatalf("after a success, back-off restarts from the initial delay; got %v", res.RetryAt.Sub(h.clock.Now()))
	}
}

func TestBackOffResetOnCredentialChange(t *testing.T) {
	h := newHarness(t, Options{})
	ref := key(t, "reg.local/team/app:v1")
	stale := keyringFor(t, Credential{Registry: "reg.local", Username: "u", Password: "old-password"})
	fixed := keyringFor(t, Credential{Registry: "reg.local", Username: "u", Password: "new-password"})
	h.svc.failWith(ref, err401)
	req := Request{Image: "reg.local/team/app:v1", Keyring: stale}
	h.eng.Enqueue(h.ctx, req)
	if res := h.result(t); res.Class != pull.ClassUnauthorized || res.RetryAt.IsZero() {
		t.Fatalf("got %+v", res)
	}
	if st := h.eng.Enqueue(h.ctx, req); st.State != pull.StateBackOff {
		t.Fatalf("same secret: %s, want BackOff", st.State)
	}
	req.Keyring = fixed
	if st := h.eng.Enqueue(h.ctx, req); st.State != pull.StateQueued {
		t.Fatalf("fixed secret: %s, want Queued at once", st.State)
	}
	if res := h.result(t); !res.Succeeded() {
		t.Fatalf("got %+v", res)
	}
	if got := h.svc.pullAt(1).auth.GetPassword(); got != "new-password" {
		t.Fatal("the retry did not use the new secret")
	}
}

func TestNoBackOffForCancelAndDisk(t *testing.T) {
	for _, c := range []Class{"", pull.ClassCanceled, pull.ClassDiskPressure, pull.ClassInvalidImageName} {
		// Attempts 0: the runtime was never called (the disk guard refused).
		if backsOff(Result{Class: c}) {
			t.Errorf("%q backs off", c)
		}
	}
	for _, c := range []Class{pull.ClassNotFound, pull.ClassUnauthorized, pull.ClassRegistryUnavailable, pull.ClassRateLimited, pull.ClassTimeout, pull.ClassErrImagePull, pull.ClassNoMatchingPlatform, pull.ClassSignatureValidationFailed} {
		if !backsOff(Result{Class: c, Attempts: 1}) {
			t.Errorf("%q does not back off", c)
		}
	}
	// The runtime ran out of space during a pull the guard let through.
	if !backsOff(Result{Class: pull.ClassDiskPressure, Attempts: 1}) {
		t.Error("a runtime out of space does not back off")
	}
}

func TestCredentialCandidates(t *testing.T) {
	const image = "reg.local/team/app:v1"
	kr := keyringFor(t,
		Credential{Registry: "reg.local", Username: "host-wide", Password: "pw-host"},
		Credential{Registry: "reg.local/team", Username: "team", Password: "pw-team"},
	)
	tests := []struct {
		name      string
		keyring   *Keyring
		errs      []error
		wantUsers []string // "" = anonymous
		wantClass Class
	}{
		{"anonymous without keyring", nil, nil, []string{""}, ""},
		{"anonymous when nothing matches", keyringFor(t, Credential{Registry: "other.local", Username: "x", Password: "y"}), nil, []string{""}, ""},
		{"first candidate works", kr, nil, []string{"team"}, ""},
		{"next after unauthorized", kr, []error{err401}, []string{"team", "host-wide"}, ""},
		{"all refused", kr, []error{err401, err401}, []string{"team", "host-wide"}, pull.ClassUnauthorized},
		{"no next after another failure", kr, []error{errNotFoundCRI}, []string{"team"}, pull.ClassNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.svc.failWith(key(t, image), tt.errs...)
			h.eng.Enqueue(h.ctx, Request{Image: image, Keyring: tt.keyring})
			res := h.result(t)
			if res.Class != tt.wantClass || res.Attempts != len(tt.wantUsers) {
				t.Fatalf("class %q attempts %d, want %q %d", res.Class, res.Attempts, tt.wantClass, len(tt.wantUsers))
			}
			for i, want := range tt.wantUsers {
				p := h.svc.pullAt(i)
				if (want == "") != (p.auth == nil) || p.auth.GetUsername() != want {
					t.Fatalf("attempt %d used %q, want %q", i, p.auth.GetUsername(), want)
				}
				if p.auth.GetServerAddress() != "" {
					t.Fatalf("ServerAddress sent: %q", p.auth.GetServerAddress())
				}
			}
		})
	}
}

func TestPasswordNeverInResult(t *testing.T) {
	h := newHarness(t, Options{})
	const pw = "hunter2-secret"
	ref := key(t, "reg.local/app")
	h.svc.failWith(ref, status.Error(codes.Unknown, "registry said: bad password "+pw))
	h.eng.Enqueue(h.ctx, Request{Image: "reg.local/app", Keyring: keyringFor(t, Credential{Registry: "reg.local", Username: "u", Password: pw})})
	res := h.result(t)
	if strings.Contains(res.Message, pw) || !strings.Contains(res.Message, redacted) {
		t.Fatalf("message %q", res.Message)
	}
}

// TestBackOffFloorForLargeImages: a large image's failed attempt waits at
// least as long as it ran (at most an hour) before the next; a small
// image's failure that ran as long keeps the kubelet's schedule.
func TestBackOffFloorForLargeImages(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
		ran  time.Duration
		want time.Duration
	}{
		{"large", 2 << 30, 20 * time.Minute, 20 * time.Minute},
		{"large, short attempt", 2 << 30, 3 * time.Second, 10 * time.Second},
		{"large, capped", 2 << 30, 3 * time.Hour, time.Hour},
		{"small", 100 << 20, 20 * time.Minute, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{LargePullBytes: 1 << 30, PullTimeout: 100 * time.Hour})
			ref := key(t, "a")
			h.eng.mu.Lock()
			h.eng.needs[ref] = need{fetch: tc.size}
			h.eng.mu.Unlock()
			release := h.svc.block(ref)
			h.svc.failWith(ref, errNotFoundCRI)
			h.enqueue("a", 0)
			h.svc.waitStarted(t, ref)
			h.clock.Step(tc.ran)
			release()
			res := h.result(t)
			if got := res.RetryAt.Sub(h.clock.Now()); res.Class != pull.ClassNotFound || got != tc.want {
				t.Fatalf("got %s retry in %v, want NotFound retry in %v", res.Class, got, tc.want)
			}
			if tc.want > 15*time.Minute {
				// Past flowcontrol's memory of the key (twice its 5-minute cap)
				// but not of the floor's wait.
				h.clock.Step(11 * time.Minute)
				h.eng.backoff.gc()
				if st := h.enqueue("a", 0); st.State != pull.StateBackOff {
					t.Fatalf("after a gc, during the floor's wait: %s", st.State)
				}
			}
		})
	}
}
