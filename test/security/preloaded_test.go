package security

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// pullCalls is the agent's count of its PullImage calls.
const pullCalls = "warmer_cri_pull_image_calls_total"

// preloadBed is one node whose runtime holds a private image that another
// client pulled (as a node image bakes it), team-a with the pull secret
// for it and team-b without, and the registry's access log.
type preloadBed struct {
	f      *testbed.Fleet
	proxy  *faults.FaultProxy
	regs   testbed.Registries
	baked  string // the preloaded image, through the proxy
	user   string // the registry login team-a's secret holds
	secret string
}

func startPreloadBed(t *testing.T, extra ...string) *preloadBed {
	t.Helper()
	regs := testbed.StartRegistries(t)
	proxy := faults.StartFaultProxy(t, regs.Auth.Host)
	settings := testbed.DefaultAgent.With(extra...)
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{Agent: &settings})
	b := &preloadBed{f: f, proxy: proxy, regs: regs, user: regs.Auth.Username(), secret: "regcred"}
	for _, ns := range []string{nsA, nsB} {
		f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		f.CP.LendPullSecrets(t, ns)
	}
	f.Create(t, build.DockerConfigSecret(nsA, b.secret, proxy.Host, b.user, regs.Auth.Password()))
	pushed := regs.Auth.PushRandom(t, "private/baked:v1", testbed.ImageOptions{LayerSize: 128 << 10}).Ref
	b.baked = strings.Replace(pushed, regs.Auth.Host, proxy.Host, 1)
	// Another client's pull, with the registry's login: the agent has no
	// record of it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.Nodes[node].CRI.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: b.baked},
		Auth: &runtimeapi.AuthConfig{Username: b.user, Password: regs.Auth.Password()}}); err != nil {
		t.Fatalf("preloading %s: %v", b.baked, err)
	}
	return b
}

// entry is the node's entry of image for scope.
func (b *preloadBed) entry(image, scope string) (warmv1.NodeImage, error) {
	nw, err := b.f.NodeWarm(node)
	if err != nil {
		return warmv1.NodeImage{}, err
	}
	for _, img := range nw.Status.Images {
		if img.Image == image && img.SecretsNamespace == scope {
			return img, nil
		}
	}
	return warmv1.NodeImage{}, fmt.Errorf("no entry of %s for %q in %d", image, scope, len(nw.Status.Images))
}

// TestPreloadedImages: under the default policy (the kubelet's,
// NeverVerifyPreloadedImages) an image the agent did not pull counts as
// present for every namespace with no request to the registry; an image
// the agent pulled with team-a's secret still never counts for team-b; and
// an agent that takes over a report written before proofs (an upgrade)
// carries team-a's entries over without asking the registry again, still
// closed to team-b.
func TestPreloadedImages(t *testing.T) {
	b := startPreloadBed(t)
	mark := len(b.proxy.Requests())
	b.f.Create(t, warmWith(nsA, "with-secret", b.secret, b.baked))
	b.f.Create(t, build.ImageWarm(nsB, "without", build.Images(b.baked)))
	waitReady(t, b.f, nsA, "with-secret")
	waitReady(t, b.f, nsB, "without")
	for _, scope := range []string{nsA, ""} {
		if e, err := b.entry(b.baked, scope); err != nil || e.State != warmv1.ImagePresent || e.Verified {
			t.Errorf("entry %q: %+v (%v): want Present, not verified", scope, e, err)
		}
	}
	if reqs := b.proxy.Requests()[mark:]; len(reqs) > 0 {
		t.Errorf("the registry was asked %d times for a preloaded image: %v", len(reqs), reqs[0].Path)
	}
	if n := b.f.Nodes[node].Metric(t, pullCalls); n != 0 {
		t.Errorf("%s = %v, want 0", pullCalls, n)
	}

	// team-a's own image, pulled by the agent with team-a's secret.
	own := strings.Replace(b.regs.Auth.PushRandom(t, "private/own:v1", testbed.ImageOptions{LayerSize: 128 << 10}).Ref,
		b.regs.Auth.Host, b.proxy.Host, 1)
	b.f.Create(t, warmWith(nsA, "own", b.secret, own))
	waitReady(t, b.f, nsA, "own")

	// The upgrade: the agent stops, its report loses every proof, as an
	// agent older than proofs wrote it, and the new agent takes over.
	n := b.f.Nodes[node]
	n.Agent.Stop()
	nw, err := b.f.NodeWarm(node)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nw.Status.Images {
		nw.Status.Images[i].Verified = false
	}
	if err := b.f.CP.Client.Status().Update(context.Background(), nw); err != nil {
		t.Fatal(err)
	}
	mark = len(b.proxy.Requests())
	n.RestartAgent(t)
	b.f.Create(t, build.ImageWarm(nsB, "freeloader", build.Images(own)))
	waitReason(t, b.f, nsB, "freeloader", own, "Unauthorized")
	if e, err := b.entry(own, nsA); err != nil || e.State != warmv1.ImagePresent {
		t.Errorf("team-a's entry after the upgrade: %+v (%v): want Present", e, err)
	}
	if k := byUser(b.proxy.Requests()[mark:], b.user); k != 0 {
		t.Errorf("%d registry requests with team-a's login after the upgrade: its proofs were not carried over", k)
	}
	for _, name := range []string{"with-secret", "own"} {
		if st := b.f.ImageWarm(t, nsA, name).Status; st.Nodes.Ready != 1 {
			t.Errorf("team-a's %s after the upgrade: nodes %+v, want ready", name, st.Nodes)
		}
	}
}

// TestPreloadedImagesAlwaysVerify: under AlwaysVerify the same preloaded
// image counts for team-a only after a pull with team-a's secret (a
// request with its login), and never for team-b, which has none.
func TestPreloadedImagesAlwaysVerify(t *testing.T) {
	b := startPreloadBed(t, "--image-verification-policy=AlwaysVerify")
	mark := len(b.proxy.Requests())
	b.f.Create(t, warmWith(nsA, "with-secret", b.secret, b.baked))
	b.f.Create(t, build.ImageWarm(nsB, "without", build.Images(b.baked)))
	waitReady(t, b.f, nsA, "with-secret")
	waitReason(t, b.f, nsB, "without", b.baked, "Unauthorized")
	if e, err := b.entry(b.baked, nsA); err != nil || e.State != warmv1.ImagePresent || !e.Verified {
		t.Errorf("team-a's entry: %+v (%v): want Present, verified", e, err)
	}
	if k := byUser(b.proxy.Requests()[mark:], b.user); k == 0 {
		t.Errorf("no registry request with team-a's login: the image was not verified")
	}
	if n := b.f.Nodes[node].Metric(t, pullCalls); n < 2 {
		t.Errorf("%s = %v, want a call for each namespace at least", pullCalls, n)
	}
}

// TestPrivatePullOutlivesItsWarm: an image the agent pulled with team-a's
// secret, whose ImageWarm was then deleted, is still not preloaded after
// the agent restarts with no proof of it left (its NodeWarm entry went with
// the ImageWarm, its memory with the restart): the runtime's mark says
// the agent's pull brought it, so team-b, without credentials, is
// Unauthorized rather than given team-a's image as present.
func TestPrivatePullOutlivesItsWarm(t *testing.T) {
	b := startPreloadBed(t)
	own := strings.Replace(b.regs.Auth.PushRandom(t, "private/gone:v1", testbed.ImageOptions{LayerSize: 128 << 10}).Ref,
		b.regs.Auth.Host, b.proxy.Host, 1)
	w := warmWith(nsA, "own", b.secret, own)
	b.f.Create(t, w)
	waitReady(t, b.f, nsA, "own")
	if err := b.f.CP.Client.Delete(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, time.Minute, "team-a's entry gone from the report", func() error {
		if e, err := b.entry(own, nsA); err == nil {
			return fmt.Errorf("still reported: %+v", e)
		}
		return nil
	})
	n := b.f.Nodes[node]
	n.Agent.Stop()
	n.RestartAgent(t)
	b.f.Create(t, build.ImageWarm(nsB, "freeloader", build.Images(own)))
	waitReason(t, b.f, nsB, "freeloader", own, "Unauthorized")
}
