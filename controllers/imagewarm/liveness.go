package imagewarm

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// Which agents are alive. An agent writes its NodeWarm only when something
// changes, so a dead agent's last report stands: it would keep its
// rollout slot, and its node would look warm or pulling, for ever. The
// kubelet already says whether each agent is alive, in its Pod's Ready
// condition (the agent is Ready while its runtime answers CRI), at no
// write of warmer's. So the controller watches the agent Pods, in
// warmer's own namespace only, and an agent whose Pod has not been Ready
// for AgentDeadAfter is dead: its node counts as not reporting, is named
// in silentNodes from when the Pod stopped being Ready, and takes no
// rollout slot, which goes to the next node. A node where no agent Pod is
// in sight (agents run another way, or AgentNamespace is empty) is judged
// by its report alone.

// AgentDeadAfter is how long an agent's Pod may be not Ready before its
// node counts as not reporting: longer than an agent's restart, as long
// as a new node's grace (AgentGrace).
const AgentDeadAfter = AgentGrace

// AgentPodLabels are the labels that select the agent Pods: those of the
// agent DaemonSet's template (config/daemonset, the chart). A new map each
// call: a client decoding into an object that shares it may change it.
func AgentPodLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": "agent"}
}

// AgentPodCache is the cache entry of the agent Pods of namespace ns:
// those alone, and of each only its node, deletion and Ready condition.
func AgentPodCache(ns string) cache.ByObject {
	return cache.ByObject{
		Namespaces: map[string]cache.Config{ns: {}},
		Label:      labels.SelectorFromSet(AgentPodLabels()),
		Transform:  trimAgentPod,
	}
}

// trimAgentPod keeps of a Pod what liveness reads, so a fleet's agent
// Pods cost little memory.
func trimAgentPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, Labels: pod.Labels, CreationTimestamp: pod.CreationTimestamp,
		DeletionTimestamp: pod.DeletionTimestamp}}
	out.Spec.NodeName = pod.Spec.NodeName
	if c := readyCondition(pod); c != nil {
		out.Status.Conditions = []corev1.PodCondition{*c}
	}
	return out, nil
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady {
			return c
		}
	}
	return nil
}

// agentState is what the Pods say of one node's agent: Ready, or not
// Ready since down.
type agentState struct {
	ready bool
	down  time.Time
}

// agentStates reads each node's agent from its Pods: alive when any is
// Ready and not being deleted (an agent being replaced has two), else
// down since the latest of the Pods stopped being Ready (or was created).
func agentStates(pods []corev1.Pod) map[string]agentState {
	out := make(map[string]agentState, len(pods))
	for i := range pods {
		pod := &pods[i]
		node := pod.Spec.NodeName
		if node == "" {
			continue
		}
		s := out[node]
		c := readyCondition(pod)
		switch {
		case s.ready:
		case c != nil && c.Status == corev1.ConditionTrue && pod.DeletionTimestamp == nil:
			s = agentState{ready: true}
		default:
			since := pod.CreationTimestamp.Time
			if c != nil && c.LastTransitionTime.After(since) {
				since = c.LastTransitionTime.Time
			}
			if since.After(s.down) {
				s.down = since
			}
		}
		out[node] = s
	}
	return out
}

// readAgents lists the agent Pods from the cache; nil when liveness is
// off.
func (r *Reconciler) readAgents(ctx context.Context) (map[string]agentState, error) {
	if r.AgentNamespace == "" {
		return nil, nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.AgentNamespace), client.MatchingLabels(AgentPodLabels()),
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the agent Pods: %w", err)
	}
	return agentStates(pods.Items), nil
}

// agentDown says whether node's agent is dead at now, and since when.
func (f *fleet) agentDown(node string) (time.Time, bool) {
	s, ok := f.agents[node]
	if !ok || s.ready || f.now.Sub(s.down) < AgentDeadAfter {
		return time.Time{}, false
	}
	return s.down, true
}

// nextDeath is how soon an agent that is down now will count as dead; 0
// when none will.
func (f *fleet) nextDeath() time.Duration {
	var next time.Duration
	for _, s := range f.agents {
		if left := s.down.Add(AgentDeadAfter).Sub(f.now); !s.ready && left > 0 && (next == 0 || left < next) {
			next = left
		}
	}
	return next
}

// agentPodHandler enqueues the ImageWarms that select the node of an
// agent Pod that came, went or changed readiness.
func (r *Reconciler) agentPodHandler() handler.EventHandler {
	enqueue := func(ctx context.Context, q requestQueue, obj client.Object) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		node := &metav1.PartialObjectMetadata{}
		node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		if err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
			return // no such node: no ImageWarm counts it
		}
		r.enqueueSelecting(ctx, q, node.Labels)
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q requestQueue) { enqueue(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q requestQueue) {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			if ok1 && ok2 && podReady(o) == podReady(n) && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
				return
			}
			enqueue(ctx, q, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q requestQueue) { enqueue(ctx, q, e.Object) },
	}
}

func podReady(pod *corev1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}
