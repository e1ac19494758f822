package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// The checks in this file run on an install that TestKustomizeInstall
// made: its agent and controller Ready, the samples' ImageWarms Ready.

// agentUser is the user the API server takes the agent's token for.
const agentUser = "system:serviceaccount:" + installNamespace + ":warmer-agent"

// testAgentToken uses the service-account token the kubelet mounted into
// the running agent's container, read where containerd says that mount
// comes from (the image has no shell to cat it with): the API server takes
// it for the agent on this node, it may read no Secret outside warmer's
// namespace, the admission policy lets it write its own NodeWarm and
// refuses another node's, with the policy's message; and its NodeWarm
// shows it read the level from the kubelet, whose certificate it checked.
func testAgentToken(t *testing.T) {
	ctx := context.Background()
	agent := tokenClient(t, mountedToken(t, agentPod(t)))

	review := &authenticationv1.SelfSubjectReview{}
	if err := agent.Create(ctx, review); err != nil {
		t.Fatalf("who the agent's token is: %v", err)
	}
	u := review.Status.UserInfo
	if u.Username != agentUser || !slices.Equal(u.Extra["authentication.kubernetes.io/node-name"], []string{node.Name}) {
		t.Fatalf("the agent's token is %s with extra %v, want %s on node %s", u.Username, u.Extra, agentUser, node.Name)
	}

	// Its own NodeWarm, which the agent made: an update of it and of its
	// status are admitted. Dry runs go through authorization and
	// admission and store nothing, so the agent's report stays as it is.
	var own warmv1.NodeWarm
	if err := agent.Get(ctx, client.ObjectKey{Name: node.Name}, &own); err != nil {
		t.Fatalf("the agent reading its own NodeWarm: %v", err)
	}
	// The level of the image filesystem came from the kubelet, whose
	// serving certificate the agent verified: the install passes no
	// --kubelet-insecure-tls, and an unverified kubelet leaves the level
	// unknown.
	if c := meta.FindStatusCondition(own.Status.Conditions, warmv1.ConditionDiskPressure); own.Status.ImageFilesystem == nil ||
		c == nil || c.Reason == warmv1.ReasonLevelUnknown {
		t.Errorf("the agent's NodeWarm: image filesystem %+v, DiskPressure %+v; want the level read from the kubelet", own.Status.ImageFilesystem, c)
	}
	// No Secret outside warmer's namespace, named or not.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-for-agents"}, StringData: map[string]string{"k": "v"}}
	if err := node.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), sec) })
	if err := agent.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent's pod token reading a Secret of namespace default: %v, want Forbidden", err)
	}
	own.Labels = map[string]string{"test.warmer.dev/dry-run": "own"}
	if err := agent.Update(ctx, own.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("the agent updating its own NodeWarm: %v", err)
	}
	own.Status.Pulling++
	if err := agent.Status().Update(ctx, own.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("the agent updating its own NodeWarm's status: %v", err)
	}

	// Another node's: refused by the policy, not by RBAC (which allows
	// create on every NodeWarm).
	other := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "other-" + node.Name}}
	err := agent.Create(ctx, other)
	if err == nil {
		_ = node.Client.Delete(ctx, other)
	}
	want := fmt.Sprintf("may write only NodeWarm %s, not %s", node.Name, other.Name)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("the agent creating NodeWarm %s: %v, want Forbidden with %q", other.Name, err, want)
	}
}

// agentPod is the install's running agent Pod.
func agentPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods := installedPods(t, "agent")
	if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
		t.Fatalf("want one running agent pod, have %d", len(pods))
	}
	return &pods[0]
}

// installedPods are the install's Pods of one component ("agent",
// "controller") that are neither terminating nor finished.
func installedPods(t *testing.T, component string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	err := node.Client.List(context.Background(), &pods, client.InNamespace(installNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": component})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
	})
}

// containerID is the runtime's id of the pod's only container.
func containerID(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	id, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if !ok {
		t.Fatalf("pod %s: container id %q", pod.Name, pod.Status.ContainerStatuses[0].ContainerID)
	}
	return id
}

// mountedToken reads the token the kubelet projected into the pod's
// container, from the host folder containerd mounts there.
func mountedToken(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	rt := node.Containerd.RuntimeService(t)
	st, err := rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: containerID(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Status.Mounts {
		if m.ContainerPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
			b, err := os.ReadFile(filepath.Join(m.HostPath, "token"))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("pod %s has no service-account token mounted", pod.Name)
	return ""
}

// tokenClient is a client of the node's API server with a bearer token.
func tokenClient(t *testing.T, token string) client.Client {
	t.Helper()
	cfg := &rest.Config{Host: node.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: node.Config.CAData}}
	c, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testOneWarmedEvent warms an ImageWarm of two images the node does not
// have and checks its events: one Warmed event from this node, counting
// both pulls, never repeated.
func testOneWarmedEvent(t *testing.T) {
	ctx := context.Background()
	pushed := map[string]testbed.Image{}
	var images []warmv1.ImageReference
	for _, ref := range []string{"warmer-dev/warm-a:v1", "warmer-dev/warm-b:v1"} {
		pushed[ref] = reg.PushRandom(t, ref, testbed.ImageOptions{LayerSize: 4 * testbed.MB})
		images = append(images, warmv1.ImageReference("docker.io/"+ref))
	}
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "two-images"},
		Spec:       warmv1.ImageWarmSpec{Images: images},
	}
	if err := node.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Client.Delete(context.Background(), iw)
		for _, ref := range images {
			removeImage(t, string(ref))
		}
	})
	waitImageWarmReady(t, iw.Name)
	checkPulled(t, pushed)

	warmed := func() []eventsv1.Event {
		var list eventsv1.EventList
		if err := node.Client.List(ctx, &list, client.InNamespace(iw.Namespace)); err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Reason != "Warmed" || e.Regarding.UID != iw.UID
		})
	}
	poll(t, time.Minute, "a Warmed event on "+iw.Name, func() error {
		if len(warmed()) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	// A second one, or a repeat folded into the first, would follow the
	// first within the agent's next pass, at once.
	time.Sleep(3 * time.Second)
	events := warmed()
	if len(events) != 1 {
		t.Fatalf("%d Warmed events on %s, want 1: %+v", len(events), iw.Name, events)
	}
	e := events[0]
	if e.Series != nil || e.DeprecatedCount > 1 {
		t.Errorf("the Warmed event was repeated: series %+v, count %d", e.Series, e.DeprecatedCount)
	}
	if e.Related == nil || e.Related.Name != node.Name {
		t.Errorf("the Warmed event is related to %+v, want node %s", e.Related, node.Name)
	}
	if !strings.Contains(e.Note, "pulled 2 (") {
		t.Errorf("the Warmed event says %q, want it to count both pulls (pulled 2)", e.Note)
	}
}

// testReinstall applies the install's layer again over the running
// install, as a user re-running `kubectl apply -k` does: nothing rolls,
// the ImageWarms stay Ready all along, and no image is pulled.
func testReinstall(t *testing.T, layer string) {
	ready := readySince(t)
	gens := workloadGenerations(t)
	mark := pullLogMark(t)
	notReady := watchReady(t)

	kubectl(t, "apply", "-k", layer)
	waitWorkloads(t)
	// Long enough for the agent's and the controller's reaction to any
	// change the apply made to be seen.
	time.Sleep(5 * time.Second)

	if seen := notReady(); len(seen) > 0 {
		t.Errorf("ImageWarms not Ready during the re-install: %v", seen)
	}
	if now := readySince(t); !mapsEqual(now, ready) {
		t.Errorf("the ImageWarms' Ready conditions moved: before %v, after %v", ready, now)
	}
	if now := workloadGenerations(t); now != gens {
		t.Errorf("the re-install changed the workloads (generations %v, before %v): they roll on every apply", now, gens)
	}
	checkNoPulls(t, mark)
}

// readySince is the time each ImageWarm in default became Ready; it fails
// the test if one is not Ready.
func readySince(t *testing.T) map[string]time.Time {
	t.Helper()
	var list warmv1.ImageWarmList
	if err := node.Client.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	since := map[string]time.Time{}
	for _, iw := range list.Items {
		c := meta.FindStatusCondition(iw.Status.Conditions, warmv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("ImageWarm %s not Ready: %+v", iw.Name, iw.Status.Conditions)
		}
		since[iw.Name] = c.LastTransitionTime.Time
	}
	if len(since) == 0 {
		t.Fatal("no ImageWarm in default")
	}
	return since
}

func mapsEqual(a, b map[string]time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !w.Equal(v) {
			return false
		}
	}
	return true
}

// workloadGenerations are the generations of the agent's DaemonSet and the
// controller's Deployment.
func workloadGenerations(t *testing.T) [2]int64 {
	t.Helper()
	var ds appsv1.DaemonSet
	var d appsv1.Deployment
	if err := node.Client.Get(context.Background(), client.ObjectKey{Namespace: installNamespace, Name: "warmer-agent"}, &ds); err != nil {
		t.Fatal(err)
	}
	if err := node.Client.Get(context.Background(), client.ObjectKey{Namespace: installNamespace, Name: "warmer-controller"}, &d); err != nil {
		t.Fatal(err)
	}
	return [2]int64{ds.Generation, d.Generation}
}

// watchReady watches the ImageWarms in default from now on; the function
// it returns stops the watch and says which were seen not Ready, and when.
func watchReady(t *testing.T) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(node.Config, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &warmv1.ImageWarmList{}, client.InNamespace("default"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() {
		var seen []string
		for ev := range w.ResultChan() {
			iw, ok := ev.Object.(*warmv1.ImageWarm)
			if ok && !meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) {
				seen = append(seen, fmt.Sprintf("%s %s at %s", ev.Type, iw.Name, time.Now().Format(time.StampMilli)))
			}
		}
		done <- seen
	}()
	stopped := false
	stop := func() []string {
		if stopped {
			return nil
		}
		stopped = true
		w.Stop()
		return <-done
	}
	t.Cleanup(func() { stop() })
	return stop
}

// testStartsServed starts, on the real node, a Pod from an image the
// installed agent warmed and one from an image it did not: the NodeWarm's
// servedStarts (what the agent counts from CRI ListContainers) moves by
// the first alone, and so does the ImageWarm's.
func testStartsServed(t *testing.T) {
	ctx := context.Background()
	hello := testbed.GoImage(t, "./test/cluster/hello")
	distinct := func(repo string) string {
		// A layer of its own: an image ID no other test's image has.
		layer, err := random.Layer(1024, types.DockerLayer)
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(hello, layer)
		if err != nil {
			t.Fatal(err)
		}
		reg.Push(t, repo, img)
		return mirrored + "/" + repo
	}
	warm, cold := distinct("warmer-dev/served-warm:v1"), distinct("warmer-dev/served-cold:v1")
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "served"},
		Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{warmv1.ImageReference(warm)}},
	}
	if err := node.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Client.Delete(context.Background(), iw)
		removeImage(t, warm)
		removeImage(t, cold)
	})
	waitImageWarmReady(t, iw.Name)
	before := servedStarts(t)

	ns := namespace(t)
	for _, p := range []struct{ name, image string }{{"from-warm", warm}, {"from-cold", cold}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns},
			Spec: corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "hello", Image: p.image, Env: node.PodEnv()}}},
		}
		if err := node.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, pod, corev1.PodSucceeded)
	}
	// The agent lists containers in its passes, one a resync period (1m)
	// at least.
	poll(t, 3*time.Minute, "servedStarts moved", func() error {
		if n := servedStarts(t); n != before+1 {
			return fmt.Errorf("servedStarts %d, want %d", n, before+1)
		}
		return nil
	})
	// The ImageWarm's own count: the node's start from its image, summed
	// by the controller (both paced at 5s by the bed's install).
	poll(t, time.Minute, "the ImageWarm's servedStarts moved", func() error {
		var got warmv1.ImageWarm
		if err := node.Client.Get(ctx, client.ObjectKeyFromObject(iw), &got); err != nil {
			return err
		}
		if got.Status.ServedStarts != 1 {
			return fmt.Errorf("ImageWarm servedStarts %d, want 1", got.Status.ServedStarts)
		}
		return nil
	})
	time.Sleep(70 * time.Second) // a further pass: the cold start must not count
	if n := servedStarts(t); n != before+1 {
		t.Errorf("servedStarts %d after a further pass, want %d: the Pod of the image not warmed counted", n, before+1)
	}
}

// servedStarts is the node's NodeWarm's count of starts served warm.
func servedStarts(t *testing.T) int32 {
	t.Helper()
	var nw warmv1.NodeWarm
	if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &nw); err != nil {
		t.Fatal(err)
	}
	return nw.Status.ServedStarts
}
