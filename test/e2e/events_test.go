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
// what a user reading events sees: at most two Event objects per node
// (Failed and BackOff), whose series counts rise, and a `kubectl describe`
// that stays short. Before, every retry made new Event objects: the
// events referred to the ImageWarm at its resourceVersion, which each of
// the controller's status writes changes.
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
	rose := false
	for _, e := range evs {
		node := relatedNode(e)
		perNode[node] = append(perNode[node], e.Reason)
		rose = rose || (e.Series != nil && e.Series.Count >= 2)
	}
	for _, n := range nodes {
		if len(perNode[n]) == 0 || len(perNode[n]) > 2 {
			t.Errorf("%s: %d Event objects %v, want 1 or 2 (Failed, BackOff)", n, len(perNode[n]), perNode[n])
		}
	}
	if len(evs) > 2*len(nodes) {
		t.Errorf("%d Event objects for %d nodes, want at most %d", len(evs), len(nodes), 2*len(nodes))
	}
	if !rose {
		t.Errorf("no event series counts a repeat: %v", perNode)
	}

	out, err := f.CP.Kubectl(t, "describe", "imagewarm", "missing", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl describe: %v\n%s", err, out)
	}
	if rows := eventRows(out); rows > 2*len(nodes) {
		t.Errorf("kubectl describe shows %d event rows, want at most %d:\n%s", rows, 2*len(nodes), out)
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
