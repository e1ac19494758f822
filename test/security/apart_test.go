package security

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestCredentialsApart: team-a warms its private image with its secret;
// then team-b (no secret, pullPolicy Always, the image pinned) and team-c
// (a secret the registry refuses) ask for the same image on the same
// node, where it already is. Neither becomes Ready: each is Unauthorized,
// judged by its own credentials. The registry's access log, through a
// proxy that records each request's user, shows no request made with
// team-a's login after team-a was warm: no other namespace's wish used
// it, for a pull or a refresh. team-a stays Ready.
func TestCredentialsApart(t *testing.T) {
	regs := testbed.StartRegistries(t)
	proxy := faults.StartFaultProxy(t, regs.Auth.Host)
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{})
	const nsC = "team-c"
	for _, ns := range []string{nsA, nsB, nsC} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if ns == nsB {
			n.Labels = map[string]string{"warmer.dev/cluster-levers": "allowed"} // may pin
		}
		f.Create(t, n)
		f.CP.LendPullSecrets(t, ns)
	}
	pushed := regs.Auth.PushRandom(t, "private/apart:v1", testbed.ImageOptions{LayerSize: 256 << 10}).Ref
	image := strings.Replace(pushed, regs.Auth.Host, proxy.Host, 1)
	user := regs.Auth.Username()

	f.Create(t, build.DockerConfigSecret(nsA, "regcred", proxy.Host, user, regs.Auth.Password()))
	f.Create(t, warmWith(nsA, "owner", "regcred", image))
	waitReady(t, f, nsA, "owner")
	before := len(proxy.Requests())
	if byUser(proxy.Requests(), user) == 0 {
		t.Fatalf("the access log has no request with team-a's login (%d requests): it would prove nothing", before)
	}

	freeloader := build.ImageWarm(nsB, "freeloader", build.Images(image))
	freeloader.Spec.PullPolicy = warmv1.PullAlways
	freeloader.Spec.RefreshInterval = &metav1.Duration{Duration: time.Minute}
	freeloader.Spec.Retention = warmv1.RetentionPinned
	f.Create(t, freeloader)
	f.Create(t, build.DockerConfigSecret(nsC, "othercred", proxy.Host, "intruder", "not-the-password"))
	f.Create(t, warmWith(nsC, "guesser", "othercred", image))

	for _, w := range []struct{ ns, name string }{{nsB, "freeloader"}, {nsC, "guesser"}} {
		waitReason(t, f, w.ns, w.name, image, "Unauthorized")
	}
	// Let each retry at least once more (1 s back-off, doubling).
	time.Sleep(5 * time.Second)
	for _, w := range []struct{ ns, name string }{{nsB, "freeloader"}, {nsC, "guesser"}} {
		if st := f.ImageWarm(t, w.ns, w.name).Status; st.Nodes.Ready != 0 || st.Nodes.Failed != 1 {
			t.Errorf("%s/%s nodes %+v: want the node failed, not ready", w.ns, w.name, st.Nodes)
		}
	}
	after := proxy.Requests()[before:]
	if n := byUser(after, user); n != 0 {
		t.Errorf("%d registry requests with team-a's login after team-a was warm; want none", n)
	}
	if byUser(after, "intruder") == 0 || byUser(after, "") == 0 {
		t.Errorf("the access log lacks team-c's and team-b's own attempts: it would prove nothing")
	}
	if st := f.ImageWarm(t, nsA, "owner").Status; st.Nodes.Ready != 1 {
		t.Errorf("team-a's ImageWarm nodes %+v: want still ready", st.Nodes)
	}
}

// waitReady waits for an ImageWarm's one node to be ready.
func waitReady(t *testing.T, f *testbed.Fleet, ns, name string) {
	t.Helper()
	testbed.Eventually(t, 90*time.Second, ns+"/"+name+" ready", func() error {
		if st := f.ImageWarm(t, ns, name).Status; st.Nodes.Ready != 1 {
			return fmt.Errorf("nodes %+v", st.Nodes)
		}
		return nil
	})
}

// byUser counts the requests made with user's login ("": none).
func byUser(reqs []faults.ProxyRequest, user string) int {
	n := 0
	for _, r := range reqs {
		if r.User == user {
			n++
		}
	}
	return n
}
