package plan

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Some outcomes are known only once the shell carries a plan out: whether
// the pull secrets of this pass's pulls could be read, whether the pins
// took, whether the API server let the startup taint go
// (Output.TaintNotRemoved). The shell reports them back to the plan before
// it records events and writes the status, so the planner, not the shell,
// decides what they mean, and the status and events of the pass that met a
// problem already say so.

// applyContext is what Applied needs of the pass that made a plan.
type applyContext struct {
	desired  Desired
	pins     PinView
	pinTally pinTally
	now      time.Time
}

// Applied folds into the plan what the shell found carrying it out:
// secretReads, the problem with each pull secret it read for this pass's
// pulls ("" for a usable one), and pinProblem, the first pin or unpin
// failure ("" for none). A secret's problem is reported once, as an event
// on the ImageWarms of its namespace that name it, until it is read fine;
// a pin failure turns the Pinning condition False with its message.
func (o *Output) Applied(secretReads map[types.NamespacedName]string, pinProblem string) {
	o.secretEvents(secretReads)
	if pinProblem != "" && o.pass.pins.Problem == "" {
		pins := o.pass.pins
		pins.Problem = pinProblem
		o.Status.Conditions = pinningCondition(o.Status.Conditions, pins, o.pass.pinTally, metav1.NewTime(o.pass.now))
	}
}

// secretEvents reports, once per secret and problem, a pull secret that
// cannot be used; a secret read fine forgets its problem.
func (o *Output) secretEvents(reads map[types.NamespacedName]string) {
	for nn := range o.State.secrets {
		if problem, read := reads[nn]; read && problem == "" {
			delete(o.State.secrets, nn)
		}
	}
	d := o.pass.desired
	for _, key := range d.Keys() {
		w := d.images[key]
		for _, sec := range w.secrets {
			problem := reads[sec]
			if problem == "" || o.State.secrets[sec] == problem {
				continue
			}
			o.State.secrets[sec] = problem
			var subjects []types.NamespacedName
			for _, nn := range w.warms {
				if nn.Namespace == sec.Namespace {
					subjects = append(subjects, nn)
				}
			}
			o.Events = append(o.Events, eventBadSecret(subjects, sec, problem).about(d))
		}
	}
}
