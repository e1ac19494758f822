package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient"
)

// TestUsage checks that bad usage exits 2 with one line naming the problem,
// and that help and version exit 0.
func TestUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string // in stderr for failures, stdout otherwise
	}{
		{nil, 2, "Usage:"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"version"}, 0, "warmer "},
		{[]string{"agent", "--help"}, 0, "      --max-parallel-image-pulls int "},
		{[]string{"agent", "-h"}, 0, "      --zap-log-level level "},
		{[]string{"controller", "--help"}, 0, "      --leader-elect "},
		{[]string{"agent", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"agent", "-bogus"}, 2, "unknown shorthand flag: 'b' in -bogus"},
		// Go flag's single-dash spellings, as older manifests wrote them.
		{[]string{"agent", "-node-name=n", "-max-parallel-image-pulls", "0"}, 2, "--max-parallel-image-pulls must be at least 1"},
		{[]string{"agent", "--node-name=n", "--", "-registry-qps=-1"}, 2, `unexpected argument "-registry-qps=-1"`},
		// controller-runtime's zap flags, bridged from Go's flag package.
		{[]string{"agent", "--zap-devel", "--zap-log-level=debug", "--node-name=n", "--registry-qps=-1"}, 2, "--registry-qps must not be negative"},
		{[]string{"agent", "--zap-log-level=loud"}, 2, `invalid argument "loud" for "--zap-log-level"`},
		{[]string{"agent"}, 2, "--node-name is required"},
		{[]string{"agent", "--node-name=n", "--max-parallel-image-pulls=0"}, 2, "--max-parallel-image-pulls must be at least 1"},
		{[]string{"agent", "--node-name=n", "--registry-qps=-1"}, 2, "--registry-qps must not be negative"},
		{[]string{"agent", "--node-name=n", "--image-fs-threshold-percent=101"}, 2, "--image-fs-threshold-percent must be between 1 and 100"},
		{[]string{"agent", "--node-name=n", "--image-fs-unknown=maybe"}, 2, `--image-fs-unknown must be pull or hold, got "maybe"`},
		{[]string{"agent", "--node-name=n", "--pull-stall-timeout=5s"}, 2, "--pull-stall-timeout must be 0 (off) or at least 10s, got 5s"},
		{[]string{"agent", "--node-name=n", "--pull-progress-interval=-1s"}, 2, "--pull-progress-interval must be 0 (off) or positive, got -1s"},
		{[]string{"agent", "--node-name=n", "--served-starts-interval=-1s"}, 2, "--served-starts-interval must be 0 (off) or positive, got -1s"},
		{[]string{"agent", "--node-name=n", "--yield-to-kubelet=always"}, 2, `--yield-to-kubelet must be pause, wait, requeue or off, got "always"`},
		{[]string{"agent", "--node-name=n", "--resync-period=0s"}, 2, "--resync-period must be positive"},
		{[]string{"agent", "--node-name=n", "--image-pull-backoff-max=1s"}, 2, "is shorter than --image-pull-backoff-initial"},
		{[]string{"agent", "--node-name=n", "--image-pull-backoff-jitter=0.9"}, 2, "--image-pull-backoff-jitter must be between 0 and 0.5"},
		{[]string{"agent", "--node-name=n", "--startup-taint=Not A Key"}, 2, `--startup-taint "Not A Key" is not a valid taint key`},
		{[]string{"agent", "--node-name=n", "--startup-taint-deadline=0s"}, 2, "--startup-taint-deadline must be positive"},
		{[]string{"agent", "--node-name=n", "--kubelet-port=0"}, 2, "--kubelet-port must be between 1 and 65535"},
		{[]string{"agent", "--node-name=n", "--kubelet-insecure-tls", "--kubelet-certificate-authority=ca.crt"}, 2, "exclude each other"},
		{[]string{"agent", "--node-name=n", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"agent", "--node-name=n", "--image-credential-provider-config=c.yaml"}, 2, "--image-credential-provider-config and --image-credential-provider-bin-dir go together"},
		{[]string{"agent", "--node-name=n", "--image-credential-provider-config=/nonexistent/c.yaml", "--image-credential-provider-bin-dir=/nonexistent"}, 2, "--image-credential-provider-config: reading credential provider config"},
		{[]string{"controller", "--min-status-interval=0s"}, 2, "--min-status-interval must be positive"},
		{[]string{"controller", "--served-starts-interval=0s"}, 2, "--served-starts-interval must be positive"},
		{[]string{"controller", "--images-from-kinds=Deployment,Pod"}, 2, `--images-from-kinds: "Pod" is not one of [Deployment StatefulSet DaemonSet Job CronJob], or none`},
		{[]string{"controller", "--images-from-kinds=Job,Job"}, 2, "--images-from-kinds: Job named twice"},
		{[]string{"controller", "--images-from-kinds=none,Job"}, 2, `--images-from-kinds: "none" is not one of`},
		{[]string{"controller", "--leader-elect-retry-period=0s"}, 2, "--leader-elect-retry-period must be positive"},
		{[]string{"controller", "--leader-elect-renew-deadline=60s"}, 2, "must be shorter than --leader-elect-lease-duration"},
		{[]string{"controller", "--leader-elect-retry-period=35s"}, 2, "must be longer than 1.2 times --leader-elect-retry-period"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(c.args, &out, &errOut); code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, errOut.String())
			}
			got := out.String()
			if c.code != 0 {
				got = errOut.String()
				if c.args != nil && strings.Count(strings.TrimSpace(got), "\n") > 0 && c.args[0] != "bogus" {
					t.Errorf("want one line, got:\n%s", got)
				}
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, got)
			}
		})
	}
}

// TestMalformedEndpointNotRetried checks that a malformed
// --container-runtime-endpoint ends the agent at once as bad usage, while
// a socket that is not there yet is waited for (until the context ends).
func TestMalformedEndpointNotRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := connectCRI(ctx, "tcp://127.0.0.1:1", time.Second)
	var ue usageError
	if !errors.As(err, &ue) || !errors.Is(err, criclient.ErrInvalidEndpoint) || time.Since(start) > 5*time.Second {
		t.Fatalf("connectCRI(tcp://...) = %v after %v, want a usage error at once", err, time.Since(start))
	}

	short, cancelShort := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancelShort()
	missing := "unix://" + filepath.Join(t.TempDir(), "absent.sock")
	if _, err := connectCRI(short, missing, time.Second); err == nil || errors.As(err, &ue) || short.Err() == nil {
		t.Fatalf("connectCRI(%s) = %v, want it retried until the context ended", missing, err)
	}
}
