package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const replicas = 20

// TestGatedRollout rolls a Deployment of 20 replicas over 10 nodes to a new
// image with the gate: every new Pod is created gated, none is bound
// before its image is present (by its node's own report) on the node the
// scheduler picks, and each gets the condition warmer.dev/Warm True. The
// same rollout ungated follows: some of its Pods must bind cold, or the
// bed would not show what the gate prevents.
func TestGatedRollout(t *testing.T) {
	const ns = "web"
	ctx := context.Background()
	c := fleet.CP.Client
	fleet.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	v1 := regs.Anon.PushRandom(t, "web/app:v1", testbed.ImageOptions{LayerSize: 2 * testbed.MB})
	// The new images come through a proxy at 1 MB/s per connection: each
	// node takes seconds to pull one, longer than the scheduler takes to
	// place an ungated Pod.
	slow := faults.StartSlowProxy(t, regs.Anon.Host, 1<<20)
	v2, v3 := slowRef(t, slow, "web/app:v2"), slowRef(t, slow, "web/app:v3")
	template := newPod(ns, "", "web", v1.Ref, "from-web")
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec}}}
	fleet.Create(t, deploy)
	fleet.Create(t, &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-web"}, Spec: warmv1.ImageWarmSpec{
		NodeSelector: &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"pool": "web"}},
		ImagesFrom:   &warmv1.ImagesFrom{WorkloadSelector: warmv1.LabelSelector{MatchLabels: map[string]warmv1.LabelValue{"app": "web"}}}}})
	waitReady(t, ns, "from-web", v1.Ref)

	var gatedWrites, plainWrites writes
	t.Run("gated: no Pod bound before its image is on its node", func(t *testing.T) {
		before := apiWrites(t)
		r := roll(t, deploy, v2, true)
		waitReady(t, ns, "from-web", v2)
		gatedWrites = settledWrites(t, before)
		t.Logf("gated rollout: %d Pods bound in %v, %d bound cold", replicas, r.took.Round(time.Millisecond), len(r.cold))
		if len(r.cold) > 0 {
			t.Errorf("Pods bound before their image was on the node: %v", r.cold)
		}
		if r.ungated > 0 {
			t.Errorf("%d Pods created without the gate", r.ungated)
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"rollout": v2[len(v2)-2:]}); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			cond := testbed.WarmCondition(&pods.Items[i])
			if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != gate.ReasonWarm {
				t.Errorf("Pod %s condition %s: %+v", pods.Items[i].Name, gate.ConditionWarm, cond)
			}
		}
	})

	t.Run("already warm: what the gate adds", func(t *testing.T) {
		gated, plain := bindTimes(t, ns, v2, "from-web"), bindTimes(t, ns, v2, "")
		t.Logf("creation to bound, image warm everywhere: gated %v, ungated %v", gated, plain)
		if slices.Max(gated) > 3*time.Second {
			t.Errorf("a gated Pod whose image is warm took %v to bind (target: under 1 s added)", slices.Max(gated))
		}
	})

	t.Run("ungated, for comparison", func(t *testing.T) {
		before := apiWrites(t)
		r := roll(t, deploy, v3, false)
		waitReady(t, ns, "from-web", v3)
		plainWrites = settledWrites(t, before)
		t.Logf("ungated rollout: %d Pods bound in %v, %d bound cold", replicas, r.took.Round(time.Millisecond), len(r.cold))
		// Without the gate the same check must find the race, or the
		// gated run above shows nothing.
		if len(r.cold) == 0 {
			t.Error("no ungated Pod bound cold: the bed does not reproduce the race the gate closes")
		}
	})

	t.Run("API writes the gate adds", func(t *testing.T) {
		if gatedWrites == nil || plainWrites == nil {
			t.Fatal("no write counts: a rollout above failed")
		}
		checkGateWrites(t, gatedWrites, plainWrites)
		if evs := gateEvents(t, ns, v2); len(evs) > 0 {
			t.Errorf("the controller recorded events about the warm rollout's Pods: %v", evs)
		}
		t.Logf("events in %s by reporter, reason and kind (series counts summed): %v", ns, eventSummary(t, ns))
	})
}

// gateEvents are the controller's events about the Pods of image.
func gateEvents(t *testing.T, ns, image string) []string {
	var list eventsv1.EventList
	if err := fleet.CP.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && strings.HasPrefix(e.Regarding.Name, "web-"+image[len(image)-2:]) && e.ReportingController == "warmer-controller" {
			out = append(out, e.Regarding.Name+" "+e.Reason)
		}
	}
	return out
}

// eventSummary counts the events of namespace ns by who reported them,
// their reason and the kind they are about, each with its occurrences
// (an event repeated is one object, written again only at its second
// occurrence: the events library's series).
func eventSummary(t *testing.T, ns string) map[string]int32 {
	var list eventsv1.EventList
	if err := fleet.CP.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range list.Items {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		out[e.ReportingController+" "+e.Reason+" "+e.Regarding.Kind] += n
	}
	return out
}

// checkGateWrites compares the writes of the gated and the ungated
// rollout, from the template change until every node holds the image. By
// the code, a gated Pod costs the controller two writes (the gate's
// removal, the warmer.dev/Warm condition) and events only when it goes
// cold, and the scheduler may add one (PodScheduled False,
// SchedulingGated, as it parks a gated Pod); so two to three more writes
// to Pods for each. Events are printed, not bounded here: the agents'
// own (their pulls, alike in both) move with timing; that the gate
// recorded none about a warm rollout's Pods is checked on the objects.
func checkGateWrites(t *testing.T, gated, plain writes) {
	t.Logf("writes in the gated rollout of %d Pods: %v", replicas, gated)
	t.Logf("writes in the ungated rollout of %d Pods: %v", replicas, plain)
	pods := gated.of("pods") - plain.of("pods")
	events := gated.of("events") - plain.of("events")
	t.Logf("the gate added %.0f writes to Pods (%.2f a Pod) and %.0f to events", pods, pods/replicas, events)
	if pods > 3*replicas {
		t.Errorf("the gate added %.0f writes to Pods, more than 3 a Pod", pods)
	}
	if pods < 2*replicas {
		t.Errorf("the gate added %.0f writes to Pods, fewer than the 2 a Pod it must make: the count misses them", pods)
	}
}

// rolled is what a rollout showed: its time from the template change to
// the last Pod bound, the Pods bound while their node did not report the
// image present, and the Pods created without the gate.
type rolled struct {
	took    time.Duration
	cold    []string
	ungated int
}

// roll changes the Deployment's image, creates its Pods as the new
// ReplicaSet would and watches them bind.
func roll(t *testing.T, deploy *appsv1.Deployment, image string, gated bool) rolled {
	ctx := context.Background()
	c := fleet.CP.Client
	tag := image[len(image)-2:]
	deploy.Spec.Template.Spec.Containers[0].Image = image
	if gated {
		deploy.Spec.Template.Labels[gate.LabelImageWarm] = "from-web"
	} else {
		delete(deploy.Spec.Template.Labels, gate.LabelImageWarm)
	}
	start := time.Now()
	if err := c.Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	var r rolled
	for i := range replicas {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: deploy.Namespace, Name: fmt.Sprintf("web-%s-%02d", tag, i),
			Labels: map[string]string{"rollout": tag}}, Spec: *deploy.Spec.Template.Spec.DeepCopy()}
		for k, v := range deploy.Spec.Template.Labels {
			pod.Labels[k] = v
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if !testbed.HasWarmGate(pod) {
			r.ungated++
		}
	}
	seen := map[string]bool{}
	testbed.Poll(t, 50*time.Millisecond, 3*time.Minute, "every Pod bound", func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(deploy.Namespace), client.MatchingLabels{"rollout": tag}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" || seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			if ni, err := fleet.NodeImage(p.Spec.NodeName, image); err != nil || ni.State != warmv1.ImagePresent {
				r.cold = append(r.cold, p.Name+" on "+p.Spec.NodeName)
			}
		}
		if len(seen) < replicas {
			return fmt.Errorf("%d of %d bound", len(seen), replicas)
		}
		return nil
	})
	r.took = time.Since(start)
	return r
}

// bindTimes creates five Pods of image one after another, gated on iw
// ("" for none), and returns how long each took from its creation until
// the scheduler bound it.
func bindTimes(t *testing.T, ns, image, iw string) []time.Duration {
	ctx := context.Background()
	var out []time.Duration
	for i := range 5 {
		pod := newPod(ns, fmt.Sprintf("warm-%s-%d", cmp.Or(iw, "plain"), i), "warm", image, iw)
		start := time.Now()
		if err := fleet.CP.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		testbed.Poll(t, 20*time.Millisecond, time.Minute, pod.Name+" bound", func() error {
			if err := fleet.CP.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Spec.NodeName == "" {
				return fmt.Errorf("not bound")
			}
			return nil
		})
		out = append(out, time.Since(start).Round(time.Millisecond))
	}
	return out
}

// waitReady waits until the ImageWarm is Ready with image resolved.
func waitReady(t *testing.T, ns, name, image string) {
	testbed.Eventually(t, 2*time.Minute, name+" Ready for "+image, func() error {
		iw := fleet.ImageWarm(t, ns, name)
		if !meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) || len(iw.ResolvedImages()) == 0 || iw.ResolvedImages()[0] != image {
			return fmt.Errorf("resolved %v, conditions %+v", iw.ResolvedImages(), iw.Status.Conditions)
		}
		return nil
	})
}

// slowRef pushes a 3 MB image and returns its reference through the slow
// proxy.
func slowRef(t *testing.T, slow *faults.SlowProxy, repoTag string) string {
	img := regs.Anon.PushRandom(t, repoTag, testbed.ImageOptions{LayerSize: 3 * testbed.MB})
	return strings.Replace(img.Ref, regs.Anon.Host, slow.Host, 1)
}

func ptr[T any](v T) *T { return &v }

// TestGateAffinity checks the preference the gating policy adds beside the
// gate: a preferred affinity to the nodes with the ImageWarm's warm label
// (api NodeLabelKey), appended to the Pod's own affinity whatever of it
// the Pod has, never a required term.
func TestGateAffinity(t *testing.T) {
	const ns = "affinity"
	fleet.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	own := corev1.PreferredSchedulingTerm{Weight: 7, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{own.Preference}}
	for _, c := range []struct {
		name, iw string
		affinity *corev1.Affinity
		want     int // preferred terms after admission
	}{
		{"no affinity", "web", nil, 1},
		{"pod affinity only", "web", &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}, 1},
		{"required node affinity", "web", &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}}, 1},
		{"its own preferred terms", "web", &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{own}}}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := newPod(ns, "", "affinity", "registry.invalid/a:v1", c.iw)
			pod.GenerateName, pod.Spec.Affinity = "affinity-", c.affinity.DeepCopy()
			fleet.Create(t, pod)
			if !testbed.HasWarmGate(pod) {
				t.Fatalf("no gate on %s", pod.Name)
			}
			var terms []corev1.PreferredSchedulingTerm
			if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				terms = a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				if !equality.Semantic.DeepEqual(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, requiredOf(c.affinity)) {
					t.Errorf("required node affinity changed: %+v", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
				}
			}
			if len(terms) != c.want {
				t.Fatalf("%d preferred terms, want %d: %+v", len(terms), c.want, terms)
			}
			if c.want == 2 && !equality.Semantic.DeepEqual(terms[0], own) {
				t.Errorf("the Pod's own term became %+v", terms[0])
			}
			wantKey := warmv1.NodeLabelKey(ns, c.iw)
			last := terms[len(terms)-1]
			if e := last.Preference.MatchExpressions; last.Weight != 100 || len(e) != 1 || e[0].Key != wantKey || e[0].Operator != corev1.NodeSelectorOpExists {
				t.Errorf("added term %+v, want weight 100 and %s Exists", last, wantKey)
			}
		})
	}
}

// requiredOf is an affinity's required node terms, nil for none.
func requiredOf(a *corev1.Affinity) *corev1.NodeSelector {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}
