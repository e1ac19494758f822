package pullengine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	crierrors "k8s.io/cri-api/pkg/errors"
)

// FuzzClassify feeds CRI error classification arbitrary gRPC codes, messages
// and image names. Whatever comes in, the class is one of the known
// reasons, the same for the same error however it is wrapped, and decided
// by the code where the code is unambiguous; the message shown is bounded.
func FuzzClassify(f *testing.F) {
	for _, seed := range []struct {
		code       uint32
		msg, image string
	}{
		{uint32(codes.Unknown), `failed to pull and unpack image "r.io/a:v1": failed to resolve reference "r.io/a:v1": pulling from host r.io failed with status code [manifests v1]: 401 Unauthorized`, "r.io/a:v1"},
		{uint32(codes.NotFound), `failed to pull and unpack image "r.io/team/unauthorized:v1": r.io/team/unauthorized:v1: not found`, "r.io/team/unauthorized:v1"},
		{uint32(codes.NotFound), "no match for platform in manifest: not found", "r.io/arm:v1"},
		{uint32(codes.Unknown), "dial tcp 127.0.0.1:1: connect: connection refused", "127.0.0.1:1/x:v1"},
		{uint32(codes.DeadlineExceeded), "context deadline exceeded", ""},
		{uint32(codes.Unavailable), "connection refused", ""},
		{uint32(codes.Unknown), crierrors.ErrRegistryUnavailable.Error() + ": x", ""},
		{uint32(codes.Unknown), "write /var/lib: no space left on device", "a/b"},
		{uint32(codes.Unknown), strings.Repeat("é", 3000), "é/é"},
		{uint32(codes.OK), "", ""},
	} {
		f.Add(seed.code, seed.msg, seed.image)
	}
	f.Fuzz(func(t *testing.T, rawCode uint32, msg, image string) {
		code := codes.Code(rawCode % 17)
		err := status.Error(code, msg)
		if code == codes.OK {
			if err != nil || Classify(err, image) != "" || Message(err) != "" {
				t.Fatalf("OK is no error: %v %q", err, Classify(err, image))
			}
			return
		}
		c := Classify(err, image)
		if !slices.Contains(Classes(), c) {
			t.Fatalf("class %q not a known reason (code %s, msg %q)", c, code, msg)
		}
		if again := Classify(err, image); again != c {
			t.Fatalf("unstable: %s then %s", c, again)
		}
		if w := Classify(fmt.Errorf("PullImage: %w", err), image); w != c {
			t.Fatalf("wrapping changed the class: %s to %s", c, w)
		}
		if code == codes.Unknown {
			if p := Classify(errors.New(msg), image); p != c {
				t.Fatalf("plain error %s, gRPC Unknown %s, same message %q", p, c, msg)
			}
		}
		checkCodeWins(t, code, msg, c)
		m := Message(err)
		if len(m) > MaxMessageBytes || (utf8.ValidString(msg) && !utf8.ValidString(m)) {
			t.Fatalf("message of %d bytes, valid UTF-8 %v", len(m), utf8.ValidString(m))
		}
		if len(msg) <= MaxMessageBytes && m != msg {
			t.Fatalf("short message changed: %q to %q", msg, m)
		}
	})
}

// checkCodeWins: codes that say what happened decide the class, unless the
// message carries one of the CRI standard errors, which come first.
func checkCodeWins(t *testing.T, code codes.Code, msg string, c Class) {
	t.Helper()
	if strings.HasPrefix(msg, crierrors.ErrRegistryUnavailable.Error()) || strings.HasPrefix(msg, crierrors.ErrSignatureValidationFailed.Error()) {
		return
	}
	want := map[codes.Code]Class{codes.Canceled: pull.ClassCanceled, codes.DeadlineExceeded: pull.ClassTimeout, codes.Unavailable: pull.ClassErrImagePull}[code]
	if want != "" && c != want {
		t.Fatalf("code %s gave %s, want %s", code, c, want)
	}
}
