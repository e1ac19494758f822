package imagewarm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// agentPod is an agent Pod on node, Ready or not since the given time.
func agentPod(name, node string, ready bool, since time.Time) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "warmer-system", Labels: AgentPodLabels(), CreationTimestamp: metav1.NewTime(since.Add(-time.Hour))},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)},
		}},
	}
}

// TestAgentStates reads each node's agent from its Pods: a Ready Pod is
// an agent alive, even beside a Pod on its way out; a Pod being deleted is
// not; with none Ready, the agent is down since the latest stopped being
// Ready, or was created.
func TestAgentStates(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	deleting := agentPod("d", "n3", true, t0)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	starting := agentPod("s", "n4", false, t0)
	starting.Status.Conditions = nil
	starting.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	got := agentStates([]corev1.Pod{
		agentPod("a", "n1", true, t0),
		agentPod("old", "n2", false, t0), agentPod("new", "n2", true, t0.Add(time.Second)),
		deleting,
		starting,
		agentPod("x", "n5", false, t0), agentPod("y", "n5", false, t0.Add(2*time.Minute)),
		agentPod("unscheduled", "", false, t0),
	})
	want := map[string]agentState{
		"n1": {ready: true}, "n2": {ready: true}, "n3": {down: t0}, "n4": {down: t0.Add(time.Minute)}, "n5": {down: t0.Add(2 * time.Minute)},
	}
	if len(got) != len(want) {
		t.Errorf("states %v, want %v", got, want)
	}
	for n, w := range want {
		if g := got[n]; g.ready != w.ready || !g.down.Equal(w.down) {
			t.Errorf("%s: %+v, want %+v", n, g, w)
		}
	}
}

// TestDeadAgentFreesItsSlot: with maxPulling 1, the admitted node's agent
// dies mid-pull (its last report says Pulling). Until AgentDeadAfter it
// keeps its slot; then the node counts as not reporting, is named silent
// from when its Pod stopped being Ready, and the rollout admits the next
// node. A node whose agent Pod is unknown keeps being judged by its
// report.
func TestDeadAgentFreesItsSlot(t *testing.T) {
	const image = "registry.example/app:v9"
	iw := rolloutWarm(1, num(1), false, nil)
	iw.UID = "9b2e"
	names := []string{"a", "b", "c"}
	order := slices.Clone(names)
	slices.SortFunc(order, func(x, y string) int {
		return cmp.Compare(warmv1.RolloutPlace(iw.UID, x), warmv1.RolloutPlace(iw.UID, y))
	})
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for _, n := range names {
		nodes = append(nodes, iwNodeMeta(n))
		state := warmv1.ImageQueued
		if n == order[0] {
			state = warmv1.ImagePulling
		}
		reports = append(reports, iwReport(n, iwWebAt(1), iwImg(image, state)))
	}
	first := int64(warmv1.RolloutPlace(iw.UID, order[0])) + 1
	second := int64(warmv1.RolloutPlace(iw.UID, order[1])) + 1
	for _, c := range []struct {
		name      string
		down      time.Duration // how long the first node's agent Pod has not been Ready
		bound     int64
		reporting int32
	}{
		{"alive: it keeps the slot", -1, first, 3},
		{"down less than the bound: it keeps the slot", AgentDeadAfter - time.Second, first, 3},
		{"dead: the next node gets the slot", AgentDeadAfter, second, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := iw.DeepCopy()
			w.Status.Rollout = &warmv1.RolloutStatus{Generation: 1, AdmittedBelow: first}
			f := newFleet(nodes, reports)
			f.now = now
			f.agents = agentStates([]corev1.Pod{
				agentPod("p0", order[0], c.down < 0, now.Add(-c.down)),
				agentPod("p1", order[1], true, now.Add(-time.Hour)),
				// order[2]: no agent Pod in sight; judged by its report.
			})
			st, err := aggregateStatus(w, f)
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Rollout; r == nil || r.AdmittedBelow != c.bound {
				t.Errorf("rollout %+v, want bound %d", r, c.bound)
			}
			if got := st.Nodes.Matching - st.Nodes.NotReporting; got != c.reporting {
				t.Errorf("nodes %+v: %d reporting, want %d", st.Nodes, got, c.reporting)
			}
			dead := c.reporting < 3
			if named := len(st.SilentNodes) == 1 && st.SilentNodes[0].Node == order[0] &&
				st.SilentNodes[0].Since.Time.Equal(now.Add(-c.down)); named != dead {
				t.Errorf("silentNodes %+v: the dead node named since it went down: %v, want %v", st.SilentNodes, named, dead)
			}
			if d := f.nextDeath(); dead || c.down < 0 {
				if d != 0 {
					t.Errorf("next death in %v, want none", d)
				}
			} else if d != AgentDeadAfter-c.down {
				t.Errorf("next death in %v, want %v", d, AgentDeadAfter-c.down)
			}
		})
	}
}

// TestAgentPodsFromCache reads the agent Pods as the controller does,
// through the manager's cache restricted by AgentPodCache, from a real API
// server: an agent Pod of warmer's namespace is seen with its readiness; a
// Pod without the agent's labels, or in another namespace, is not.
func TestAgentPodsFromCache(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	const ns = "warmer-system"
	opts := CacheOptions(nil)
	opts.ByObject[&corev1.Pod{}] = AgentPodCache(ns)
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme: testbed.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Logger: logr.Discard(), Cache: opts, Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), AgentNamespace: ns}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testbed.RunManager(t, mgr)
	ctx := context.Background()
	for _, n := range []string{ns, "other"} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	down := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	put := func(p corev1.Pod) {
		status := p.Status
		p.Spec.Containers = []corev1.Container{{Name: "agent", Image: "warmer"}}
		if err := cp.Client.Create(ctx, &p); err != nil {
			t.Fatal(err)
		}
		p.Status = status
		if err := cp.Client.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	put(agentPod("agent-a", "a", false, down))
	other := agentPod("agent-b", "b", false, down)
	other.Namespace = "other"
	put(other)
	unlabelled := agentPod("web", "c", false, down)
	unlabelled.Labels = map[string]string{"app": "web"}
	put(unlabelled)
	testbed.Eventually(t, 30*time.Second, "the agent Pod in the cache", func() error {
		got, err := r.readAgents(ctx)
		if err != nil {
			return err
		}
		if a, ok := got["a"]; len(got) != 1 || !ok || a.ready || a.down.IsZero() {
			return fmt.Errorf("agents %+v, want a alone, down", got)
		}
		return nil
	})
}
