package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestRolesSuffice runs the real warmer binary as the controller and as
// node-a's agent, each with its service account's permissions only (a
// kubeconfig that impersonates it) and the flags of its manifest, on real
// containerd and registries: a public image and one behind a pull secret
// get warm and the ImageWarm gets Ready. The permission checks show what
// the roles refuse; this shows they are enough.
func TestRolesSuffice(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	regs := testbed.StartRegistries(t)
	public := regs.Anon.PushRandom(t, "test/small:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	private := regs.Auth.PushRandom(t, "private/app:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	ctd := testbed.StartContainerd(t, ownNode)
	cp.CreateNode(t, ownNode, nil)

	bin := testbed.BuildWarmer(t)
	ctrl := testbed.StartProcess(t, "controller", append([]string{bin, "controller",
		"--kubeconfig", impersonatingKubeconfig(t, cp, controllerImpersonation()),
		"--leader-elect", "--leader-election-namespace=" + systemNamespace}, noListeners...)...)
	agent := testbed.StartProcess(t, "agent", append([]string{bin, "agent",
		"--kubeconfig", impersonatingKubeconfig(t, cp, agentImpersonation(ownNode)),
		"--node-name", ownNode, "--container-runtime-endpoint", ctd.Endpoint,
		// The bed's image filesystem is the shared disk (see testbed.DefaultAgent).
		"--image-fs-threshold-percent=99"}, noListeners...)...)
	procs := map[string]*testbed.Process{"controller": ctrl, "agent": agent}

	ctx := context.Background()
	auth := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q}}}`, regs.Auth.Host, regs.Auth.Username(), regs.Auth.Password())
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNamespace}}); err != nil {
		t.Fatal(err)
	}
	cp.LendPullSecrets(t, teamNamespace) // the namespace opts in
	for _, o := range []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: pullSecret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(auth)},
		},
		&warmv1.ImageWarm{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: warmName},
			Spec: warmv1.ImageWarmSpec{
				Images:           []warmv1.ImageReference{warmv1.ImageReference(public.Ref), warmv1.ImageReference(private.Ref)},
				ImagePullSecrets: []warmv1.SecretReference{{Name: pullSecret}},
			},
		},
	} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	if out, err := kubectl(t, cp, "wait", "--for=condition=Ready", "-n", teamNamespace, "imagewarm/"+warmName, "--timeout=120s"); err != nil {
		t.Fatalf("ImageWarm not Ready: %v\n%s\ncontroller:\n%s\nagent:\n%s", err, out, ctrl.Log(40), agent.Log(40))
	}
	checkWrites(t, cp)
	for name, p := range procs {
		if lines := forbidden(t, p); len(lines) > 0 {
			t.Errorf("%s was refused something:\n%s", name, strings.Join(lines, "\n"))
		}
	}
}

// checkWrites checks what the two roles wrote besides the ImageWarm's
// status: the agent's NodeWarm and events, the controller's Lease.
func checkWrites(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	var nw warmv1.NodeWarm
	if err := cp.Client.Get(ctx, types.NamespacedName{Name: ownNode}, &nw); err != nil || nw.Status.Present != 2 {
		t.Errorf("NodeWarm %s: present %d, error %v; want 2 present", ownNode, nw.Status.Present, err)
	}
	var lease coordinationv1.Lease
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: leaseName}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Errorf("leader election Lease: %+v, error %v", lease.Spec, err)
	}
	// Events are sent in the background, so they may come after Ready.
	// The agent records one Warmed event for the ImageWarm once both its
	// images are present; creating it proves the role allows events.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var events eventsv1.EventList
		if err := cp.Client.List(ctx, &events, client.InNamespace(teamNamespace)); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(events.Items, func(e eventsv1.Event) bool { return e.Reason == "Warmed" }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no Warmed event after 30s")
		}
	}
}

// impersonatingKubeconfig writes a kubeconfig that makes cp's admin
// credentials act as imp, for a warmer process.
func impersonatingKubeconfig(t *testing.T, cp *testbed.ControlPlane, imp rest.ImpersonationConfig) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups, ai.ImpersonateUserExtra = imp.UserName, imp.Groups, imp.Extra
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// noListeners are flags that turn off the metrics and probe servers: this
// test does not read them, and the manifests' :8080 and :8081 would clash
// between the two processes (and free ports picked in advance can be
// taken before a process binds them).
var noListeners = []string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}

// forbidden returns the lines of a process's log in which the API server
// refused it something.
func forbidden(t *testing.T, p *testbed.Process) []string {
	t.Helper()
	// Give a refused write in flight the time to be logged.
	time.Sleep(time.Second)
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			out = append(out, line)
		}
	}
	return out
}
