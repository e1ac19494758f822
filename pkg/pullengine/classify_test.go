package pullengine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	crierrors "k8s.io/cri-api/pkg/errors"
)

// wantByCase is the class of each case in testdata/cri-pull-errors.txt
// (real containerd answers captured on the test bed).
var wantByCase = map[string]Class{
	"nonexistent tag":                                      pull.ClassNotFound,
	"nonexistent repo":                                     pull.ClassNotFound,
	"nonexistent digest":                                   pull.ClassNotFound,
	"registry port closed":                                 pull.ClassRegistryUnavailable,
	"auth registry, no credentials":                        pull.ClassUnauthorized,
	"auth registry, wrong password":                        pull.ClassUnauthorized,
	"auth registry, image already present, no credentials": pull.ClassUnauthorized,
	"malformed: spaces":                                    pull.ClassInvalidImageName,
	"malformed: uppercase repo":                            pull.ClassInvalidImageName,
	"malformed: short digest":                              pull.ClassInvalidImageName,
	"malformed: empty":                                     pull.ClassInvalidImageName,
	"arm64-only index on amd64 node":                       pull.ClassNoMatchingPlatform,
	"client deadline 200ms on 100MB image":                 pull.ClassTimeout,
}

var errorLine = regexp.MustCompile(`^ERROR PullImage\((.*)\) after \S+: code=(\w+) msg=(".*")$`)

func TestClassifyContainerdErrors(t *testing.T) {
	f, err := os.Open("testdata/cri-pull-errors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	codeByName := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		codeByName[c.String()] = c
	}
	heading, seen := "", 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			heading = h
			continue
		}
		m := errorLine.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "ERROR") {
				t.Fatalf("unparsed error line: %s", line)
			}
			continue
		}
		want, ok := wantByCase[heading]
		if !ok {
			t.Fatalf("case %q has no expected class: add it to wantByCase", heading)
		}
		msg, err := strconv.Unquote(m[3])
		if err != nil {
			t.Fatalf("%s: %v", heading, err)
		}
		// As criclient returns it: the status wrapped with the call name.
		err = fmt.Errorf("PullImage: %w", status.Error(codeByName[m[2]], msg))
		if got := Classify(err, m[1]); got != want {
			t.Errorf("%s: Classify = %s, want %s (code %s, msg %q)", heading, got, want, m[2], msg)
		}
		seen++
	}
	if seen != len(wantByCase) {
		t.Fatalf("classified %d error lines, expected %d", seen, len(wantByCase))
	}
}

func TestClassify(t *testing.T) {
	const img = "127.0.0.1:35000/team/unauthorized:v1"
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ""},
		{"cri registry unavailable prefix", status.Error(codes.Unknown, "RegistryUnavailable: registry x is down"), pull.ClassRegistryUnavailable},
		{"cri signature prefix", status.Error(codes.Unknown, "SignatureValidationFailed: no valid signature"), pull.ClassSignatureValidationFailed},
		{"cri sentinel in-process", fmt.Errorf("pull: %w", crierrors.ErrRegistryUnavailable), pull.ClassRegistryUnavailable},
		{"crio policy", status.Error(codes.Unknown, "Source image rejected: A signature was required, but no signature exists"), pull.ClassSignatureValidationFailed},
		{"docker hub denied", status.Error(codes.Unknown, "pull access denied, repository does not exist or may require authorization"), pull.ClassUnauthorized},
		{"403", status.Error(codes.Unknown, `unexpected status from HEAD request to https://ghcr.io/v2/x/manifests/1: 403 Forbidden`), pull.ClassUnauthorized},
		{"rate limited", status.Error(codes.Unknown, "toomanyrequests: You have reached your pull rate limit"), pull.ClassRateLimited},
		{"429 on resolve", status.Error(codes.Unknown, `failed to resolve reference "r": pulling from host 127.0.0.1:1 failed with status code [manifests v1]: 429 Too Many Requests`), pull.ClassRateLimited},
		{"500 on resolve", status.Error(codes.Unknown, `failed to resolve reference "r": pulling from host 127.0.0.1:1 failed with status code [manifests v1]: 500 Internal Server Error`), pull.ClassRegistryUnavailable},
		{"reset mid-blob", status.Error(codes.Unknown, "failed to copy: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), pull.ClassRegistryUnavailable},
		{"tls", status.Error(codes.Unknown, "tls: failed to verify certificate: x509: certificate signed by unknown authority"), pull.ClassRegistryUnavailable},
		{"dns", status.Error(codes.Unknown, "dial tcp: lookup reg.invalid: no such host"), pull.ClassRegistryUnavailable},
		{"503", status.Error(codes.Unknown, "unexpected status: 503 Service Unavailable"), pull.ClassRegistryUnavailable},
		{"disk full", status.Error(codes.Unknown, "failed to extract layer: write /var/lib/x: no space left on device"), pull.ClassDiskPressure},
		{"runtime deadline text", status.Error(codes.Unknown, "context deadline exceeded"), pull.ClassTimeout},
		{"canceled code", status.Error(codes.Canceled, "context canceled"), pull.ClassCanceled},
		{"bare NotFound", status.Error(codes.NotFound, "gone"), pull.ClassNotFound},
		{"manifest unknown", status.Error(codes.Unknown, "manifest unknown: manifest unknown"), pull.ClassNotFound},
		{"cri socket down", status.Error(codes.Unavailable, "dial unix /run/containerd/containerd.sock: connect: connection refused"), pull.ClassErrImagePull},
		{"plain error", errors.New("something odd"), pull.ClassErrImagePull},
		{"image named unauthorized, really not found",
			status.Error(codes.NotFound, `failed to resolve reference "`+img+`": `+img+`: not found`), pull.ClassNotFound},
		{"image named unauthorized, registry down",
			status.Error(codes.Unknown, `failed to do request: Head "http://127.0.0.1:35000/v2/team/unauthorized/manifests/v1": dial tcp 127.0.0.1:35000: connect: connection refused`), pull.ClassRegistryUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err, img, "127.0.0.1:35000/team/unauthorized", "team/unauthorized"); got != tt.want {
				t.Fatalf("Classify = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	err := fmt.Errorf("PullImage: %w", status.Error(codes.Unknown, "boom"))
	if got := Message(err); got != "boom" {
		t.Fatalf("Message = %q, want the runtime's own text", got)
	}
	long := status.Error(codes.Unknown, strings.Repeat("é", 2000))
	got := Message(long)
	if len(got) > MaxMessageBytes || !strings.HasSuffix(got, "…") || !utf8Valid(got) {
		t.Fatalf("Message not bounded on a rune boundary: %d bytes", len(got))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestStatusMessage: a registry's own answers keep its words; a pull that
// reached no registry answering in HTTP says one fixed sentence, whatever
// the node saw there (the answers a port scan would read).
func TestStatusMessage(t *testing.T) {
	tests := []struct {
		name, msg string
		raw       bool // the runtime's words are kept
	}{
		{"port closed", `failed to do request: Head "http://127.0.0.1:35999/v2/x/y/manifests/v1": dial tcp 127.0.0.1:35999: connect: connection refused`, false},
		{"no such host", "dial tcp: lookup internal.example on 10.0.0.10:53: no such host", false},
		{"TLS to a plain port", "tls: first record does not look like a TLS handshake", false},
		{"certificate", "x509: certificate signed by unknown authority", false},
		{"a service's banner", `net/http: HTTP/1.x transport connection broken: malformed HTTP response "SSH-2.0-OpenSSH_9.2"`, false},
		{"HTTP to an HTTPS client", "http: server gave HTTP response to HTTPS client", false},
		{"timeout", "dial tcp 10.0.0.5:6379: i/o timeout", false},
		{"CRI-O's sentinel", crierrors.ErrRegistryUnavailable.Error() + ": pinging container registry 10.0.0.5:6379", false},
		{"registry's 503", "failed to resolve reference: unexpected status from HEAD request: 503 Service Unavailable", true},
		{"registry's 401", "failed to authorize: failed to fetch anonymous token: 401 Unauthorized", true},
		{"registry's 404", "failed to resolve reference: registry.example/x/y:v1: not found", true},
		{"manifest unknown", "reading manifest v1 in registry.example/x/y: manifest unknown", true},
		{"rate limit", "429 Too Many Requests: toomanyrequests: pull rate limit", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := Classify(status.Error(codes.Unknown, tt.msg))
			got := StatusMessage(class, tt.msg)
			if tt.raw && got != tt.msg {
				t.Errorf("%s %q: status says %q, want the registry's words", class, tt.msg, got)
			}
			if !tt.raw && (got != unreachedMessage || class != pull.ClassRegistryUnavailable) {
				t.Errorf("%s %q: status says %q, want RegistryUnavailable and only %q", class, tt.msg, got, unreachedMessage)
			}
		})
	}
}
