package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestFailingImageEventsFold gives three nodes an image that does not
// exist, with a short back-off so each retries several times, and checks
// what a user reading events sees: one Failed Event object per node,
// summing up the ImageWarm's failures there, which the retries that fail
// alike neither repeat nor continue as a series; and a `kubectl describe`
// that stays short. Before, each node kept a Failed and a BackOff event
// per image, patched at every retry.
func TestFailingImageEventsFold(t *testing.T) {
	const backoff = 2 * time.Second
	regs := testbed.StartRegistries(t)
	nodes := []string{"fold-1", "fold-2", "fold-3"}
	labels := map[string]map[string]string{}
	for _, n := range nodes {
		labels[n] = nil
	}
	settings := testbed.DefaultAgent
	settings.BackOffInitial, settings.BackOffMax = backoff, backoff
	f := testbed.StartFleet(t, labels, testbed.FleetOptions{Agent: &settings})
	const ns = "fold"
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	f.Create(t, build.ImageWarm(ns, "missing", build.Images(regs.Anon.Ref("no/such-image:v1"))))

	// Every node fails at least four times: the first pull, then one per
	// back-off, each retry up to BusyMargin late.
	const failures = 4
	within := testbed.SettleMargin
	for i := 1; i < failures; i++ {
		within += settings.BackOff(i) + testbed.BusyMargin
	}
	testbed.Eventually(t, within, "four failed pulls on each node", func() error {
		for _, n := range nodes {
			if got := f.Nodes[n].Metric(t, "warmer_image_pulls_total", `result="failure"`); got < failures {
				return fmt.Errorf("%s: %v failed pulls", n, got)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second) // the recorder sends asynchronously
	evs := f.Events(t, ns, "missing", "")
	perNode := map[string][]string{}
	for _, e := range evs {
		node := relatedNode(e)
		perNode[node] = append(perNode[node], e.Reason)
		if e.Reason != "Failed" || !strings.Contains(e.Note, "1 of 1 images failed to pull (NotFound 1)") {
			t.Errorf("%s: event %s %q, want the summed-up Failed", node, e.Reason, e.Note)
		}
		if e.Series != nil {
			t.Errorf("%s: the event continued as a series (%d): a retry that failed alike wrote", node, e.Series.Count)
		}
	}
	for _, n := range nodes {
		if len(perNode[n]) != 1 {
			t.Errorf("%s: %d Event objects %v, want one Failed", n, len(perNode[n]), perNode[n])
		}
	}

	out, err := f.CP.Kubectl(t, "describe", "imagewarm", "missing", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl describe: %v\n%s", err, out)
	}
	if rows := eventRows(out); rows > len(nodes) {
		t.Errorf("kubectl describe shows %d event rows, want at most %d:\n%s", rows, len(nodes), out)
	}
}

// relatedNode names the node an agent's event is about.
func relatedNode(e eventsv1.Event) string {
	if e.Related != nil && e.Related.Kind == "Node" {
		return e.Related.Name
	}
	return "?"
}

// eventRows counts the rows of the Events table `kubectl describe` prints.
func eventRows(out string) int {
	_, events, ok := strings.Cut(out, "\nEvents:")
	if !ok {
		return 0
	}
	rows := 0
	for _, line := range strings.Split(events, "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) > 0 && (fields[0] == "Normal" || fields[0] == "Warning") {
			rows++
		}
	}
	return rows
}
