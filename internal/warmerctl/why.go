package warmerctl

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Finding is one reason an ImageWarm is not Ready, in words.
type Finding struct {
	// Reason is the API's reason the finding is about.
	Reason string `json:"reason"`
	// Summary says in one sentence what is wrong and where.
	Summary string `json:"summary"`
	// Meaning and Action are the reference's words for the reason.
	Meaning string `json:"meaning,omitempty"`
	Action  string `json:"action,omitempty"`
	// Nodes are the nodes concerned (the first few of them).
	Nodes []string `json:"nodes,omitempty"`
	// Message is a node's or the controller's own words.
	Message string `json:"message,omitempty"`
}

// Why is the answer to "why is it not Ready?".
type Why struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Ready     bool      `json:"ready"`
	Findings  []Finding `json:"findings,omitempty"`
}

// Explain says why s is not Ready: each thing that holds it back, most
// actionable first. A Ready ImageWarm has no findings.
func Explain(s Summary) Why {
	w := Why{Namespace: s.Namespace, Name: s.Name, Ready: s.Ready}
	if s.Ready {
		return w
	}
	add := func(f Finding) {
		if words, ok := ReasonWords(f.Reason); ok {
			f.Meaning, f.Action = words.Meaning, words.Action
		}
		w.Findings = append(w.Findings, f)
	}
	for _, f := range specFindings(s) {
		add(f)
	}
	for _, g := range s.Failures {
		add(Finding{Reason: g.Reason, Nodes: g.Nodes, Message: g.Message,
			Summary: fmt.Sprintf("%s on %s: %s", g.Reason, count(len(g.Nodes), "node"), strings.Join(g.Images, ", ")) + retrying(g)})
		if g.Reason == warmv1.ReasonUnauthorized && len(s.PullSecrets) > 0 {
			f := &w.Findings[len(w.Findings)-1]
			f.Action += fmt.Sprintf(" This ImageWarm names the pull secrets %s: an %s event on it (kubectl events -n %s --for imagewarm/%s) says when one cannot be used.",
				strings.Join(s.PullSecrets, ", "), warmv1.ReasonInvalidPullSecret, s.Namespace, s.Name)
		}
	}
	for _, f := range nodeFindings(s) {
		add(f)
	}
	if len(w.Findings) == 0 {
		add(Finding{Reason: s.ReadyReason, Message: s.ReadyMessage, Summary: "Not Ready: " + s.ReadyReason})
	}
	return w
}

func retrying(g FailureGroup) string {
	if g.BackingOff {
		next := "retried on its own"
		if t := g.nextTry(); t != "" {
			next += ", " + t
		}
		return fmt.Sprintf(" (tried %s, backing off; %s)", count(int(g.Attempts), "time"), next)
	}
	return " (not retried until something changes)"
}

// specFindings are the ImageWarm's own reasons: suspended, no nodes, its
// images, nodes silent, the rollout.
func specFindings(s Summary) []Finding {
	var out []Finding
	switch {
	case !s.Current:
		out = append(out, Finding{Reason: "", Summary: "The controller has not yet seen the latest spec; its status describes an older one (is the controller running?)."})
	case s.ReadyReason == warmv1.ReasonSuspended, s.ReadyReason == warmv1.ReasonNoMatchingNodes,
		s.ReadyReason == warmv1.ReasonNoSupportedNodes, s.ReadyReason == warmv1.ReasonTooFewNodes:
		out = append(out, Finding{Reason: s.ReadyReason, Summary: "Ready is False: " + s.ReadyReason, Message: s.ReadyMessage})
	}
	if c := condition(s.Conditions, warmv1.ConditionImagesResolved); c != nil && c.Status == metav1.ConditionFalse {
		out = append(out, Finding{Reason: c.Reason, Summary: "Some images of the workloads imagesFrom names are left out: " + c.Reason, Message: c.Message})
	}
	if s.Nodes.NotReporting > 0 {
		out = append(out, Finding{Reason: warmv1.ReasonNotReporting, Nodes: silentNames(s.Silent),
			Summary: fmt.Sprintf("Not reporting: %s without an agent report on this spec, or with an agent not Ready", count(int(s.Nodes.NotReporting), "node"))})
	}
	if c := condition(s.Conditions, warmv1.ConditionRollout); c != nil && c.Status == metav1.ConditionFalse {
		f := Finding{Reason: c.Reason, Message: c.Message, Summary: "The rollout holds nodes back: " + c.Reason}
		if r := s.Rollout; r != nil {
			f.Summary += fmt.Sprintf(" (%s admitted, %s waiting)", count(int(r.Admitted), "node"), count(int(r.Waiting), "node"))
		}
		out = append(out, f)
	}
	if s.Nodes.Unlisted > 0 {
		out = append(out, Finding{Reason: warmv1.ReasonImagesNotListed,
			Summary: fmt.Sprintf("Unlisted: %s left some of its images out of their report", count(int(s.Nodes.Unlisted), "node"))})
	}
	return out
}

// nodeFindings are what the nodes still working say: a full disk,
// yielding to the kubelet, pulls under way.
func nodeFindings(s Summary) []Finding {
	byPhase := map[Phase][]string{}
	var full []string
	for _, n := range s.Working {
		byPhase[n.Phase] = append(byPhase[n.Phase], n.Node)
		if n.DiskPressure == warmv1.ReasonAboveThreshold {
			full = append(full, n.Node)
		}
	}
	var out []Finding
	if len(full) > 0 {
		out = append(out, Finding{Reason: warmv1.ReasonAboveThreshold, Nodes: firstFew(full),
			Summary: fmt.Sprintf("Image filesystem too full, pulls held back, on %s", count(len(full), "node"))})
	}
	if n := byPhase[PhaseYielding]; len(n) > 0 {
		out = append(out, Finding{Reason: warmv1.ReasonRuntimePulling, Nodes: firstFew(n),
			Summary: fmt.Sprintf("Yielding to pulls the runtime makes for someone else (the kubelet) on %s", count(len(n), "node"))})
	}
	if n := byPhase[PhaseWaiting]; len(n) > 0 {
		out = append(out, Finding{Reason: warmv1.ReasonWaitingForRollout, Nodes: firstFew(n),
			Summary: fmt.Sprintf("Waiting for a rollout wave: %s", count(len(n), "node"))})
	}
	if n := append(byPhase[PhasePulling], byPhase[PhaseQueued]...); len(n) > 0 {
		f := Finding{Reason: warmv1.ReasonPulling, Nodes: firstFew(n),
			Summary: fmt.Sprintf("Still pulling or queued: %s", count(len(n), "node"))}
		if s.Bytes.Total > 0 {
			f.Summary += fmt.Sprintf(": %s", bytesLine(s.Bytes, s.SecondsLeft))
		}
		out = append(out, f)
	}
	return out
}

const fewNodes = 10

func firstFew(nodes []string) []string { return nodes[:min(len(nodes), fewNodes)] }

func silentNames(silent []warmv1.SilentNode) []string {
	out := make([]string, 0, len(silent))
	for _, n := range silent {
		out = append(out, n.Node)
	}
	return out
}

func condition(cs []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(cs, t)
}

// count says "1 node", "3 nodes".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
