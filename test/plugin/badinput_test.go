package plugin

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/warmerctl"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestWhyEachFailureClass gives a real agent and controller, on real
// containerd and registries, one ImageWarm for each failure class of the
// agent's bad-input table (controllers/agent TestAgentBadInput,
// docs/reliability.md): no credentials or a missing secret
// (Unauthorized), a missing tag (NotFound), an image without the node's
// platform (NoMatchingPlatform), a registry port closed
// (RegistryUnavailable). why, as warmer-viewer, must name the reason and
// the node, quote the node's message and say what the reference says
// the reason means and what to do; status must list the failure.
func TestWhyEachFailureClass(t *testing.T) {
	regs := testbed.StartRegistries(t)
	const node, ns = "node-why", "bad"
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{})
	grantViewer(t, f.CP, viewer)
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	small := testbed.ImageOptions{LayerSize: 64 << 10}
	cases := []struct {
		name, reason, image, secret string
		hidden                      []string
	}{
		{name: "no-credentials", reason: warmv1.ReasonUnauthorized, image: regs.Auth.PushRandom(t, "private/a:v1", small).Ref},
		{name: "secret-missing", reason: warmv1.ReasonUnauthorized, image: regs.Auth.PushRandom(t, "private/b:v1", small).Ref, secret: "missing"},
		{name: "missing-tag", reason: warmv1.ReasonNotFound, image: regs.Anon.Ref("test/small:nope")},
		{name: "no-platform", reason: warmv1.ReasonNoMatchingPlatform, image: regs.Anon.PushIndex(t, "arm/only:v1", 64<<10, "arm64").Ref},
		{name: "port-closed", reason: warmv1.ReasonRegistryUnavailable, image: fmt.Sprintf("127.0.0.1:%d/x/y:v1", testbed.FreePort(t)),
			hidden: []string{"dial tcp", "connection refused"}},
	}
	for _, c := range cases {
		iw := build.ImageWarm(ns, c.name, build.Images(c.image))
		if c.secret != "" {
			iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: c.secret}}
		}
		f.Create(t, iw)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			words, ok := warmerctl.ReasonWords(c.reason)
			if !ok {
				t.Fatalf("no words for %s", c.reason)
			}
			want := []string{c.reason + " on 1 node", "nodes: " + node, "said: ", "means: " + words.Meaning, "to do: " + words.Action}
			if c.secret != "" {
				want = append(want, "names the pull secrets "+c.secret+": an InvalidPullSecret event")
			}
			var out string
			testbed.Eventually(t, 120*time.Second, "why names "+c.reason, func() error {
				var err error
				if out, err = run(t, f.CP, viewer, "why", c.name, "-n", ns); err != nil {
					return err
				}
				for _, w := range want {
					if !strings.Contains(out, w) {
						return fmt.Errorf("no %q in:\n%s", w, out)
					}
				}
				return nil
			})
			for _, h := range c.hidden {
				if strings.Contains(out, h) {
					t.Errorf("why says %q:\n%s", h, out)
				}
			}
			t.Logf("why %s:\n%s", c.name, out)
			checkNextTry(t, out)
			status, err := run(t, f.CP, viewer, "status", c.name, "-n", ns)
			if err != nil || !strings.Contains(status, c.reason+" on 1 node: "+node) {
				t.Errorf("status (%v) does not list the failure:\n%s", err, status)
			}
		})
	}
}

// nextTryText finds the next try why states for a pull backing off.
var nextTryText = regexp.MustCompile(`backing off; retried on its own, next try (\S+)\)`)

// checkNextTry holds a backing-off failure's next try to the agent's
// schedule: why must say it, and it must lie within the longest back-off
// (the agent's default, 5 minutes) of now, give or take the minute a
// node may leave it unrefreshed while a pull keeps failing alike.
func checkNextTry(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "backing off") {
		return
	}
	m := nextTryText.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("why says a pull backs off but not when it is tried next:\n%s", out)
		return
	}
	at, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		t.Fatalf("next try %q: %v", m[1], err)
	}
	if now := time.Now(); at.Before(now.Add(-2*time.Minute)) || at.After(now.Add(5*time.Minute)) {
		t.Errorf("next try %v, not within the back-off of now (%v)", at, now)
	}
}
