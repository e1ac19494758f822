package v1alpha1_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// kubectl runs the system's kubectl against the test control plane.
func kubectl(t *testing.T, cp *testbed.ControlPlane, args ...string) string {
	t.Helper()
	out, err := cp.Kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fields splits kubectl's table output into rows of whitespace-separated
// cells.
func fields(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func testKubectl(t *testing.T, cp *testbed.ControlPlane) {
	ctx := context.Background()
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubectl", Name: "web"},
		Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"nginx:1.27", "redis:7"}},
	}
	kubectl(t, cp, "create", "namespace", "kubectl")
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	iw.Status = warmv1.ImageWarmStatus{
		ImageCount:   2,
		Nodes:        warmv1.NodeCounts{Matching: 3, Ready: 2, Pulling: 1},
		Rollout:      &warmv1.RolloutStatus{Generation: 1, AdmittedBelow: 1 << 31, Admitted: 2, Waiting: 1},
		ServedStarts: 17,
		Conditions:   []metav1.Condition{{Type: warmv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Pulling", Message: "1 of 3 nodes still pulling", LastTransitionTime: metav1.Now()}},
	}
	if err := cp.Client.Status().Update(ctx, iw); err != nil {
		t.Fatal(err)
	}

	t.Run("get imagewarms", func(t *testing.T) {
		rows := fields(kubectl(t, cp, "get", "imagewarms", "-n", "kubectl"))
		want := [][]string{{"NAME", "IMAGES", "NODES", "READY", "FAILED", "WARM", "AGE"}, {"web", "2", "3", "2", "0", "False"}}
		checkTable(t, rows, want)
	})
	t.Run("get iw -o wide", func(t *testing.T) {
		rows := fields(kubectl(t, cp, "get", "iw", "-n", "kubectl", "-o", "wide"))
		want := [][]string{{"NAME", "IMAGES", "NODES", "READY", "FAILED", "WARM", "PULLING", "NOT-REPORTING", "ADMITTED", "REASON", "SERVED", "AGE"}, {"web", "2", "3", "2", "0", "False", "1", "0", "2", "Pulling", "17"}}
		checkTable(t, rows, want)
	})
	t.Run("get nodewarms", func(t *testing.T) {
		nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-node"}}
		if err := cp.Client.Create(ctx, nw); err != nil {
			t.Fatal(err)
		}
		nw.Status = warmv1.NodeWarmStatus{Desired: 4, Present: 2, Pulling: 1, Failed: 1, Progress: "3.0 MiB of 16 MiB (18%), 9s left"}
		if err := cp.Client.Status().Update(ctx, nw); err != nil {
			t.Fatal(err)
		}
		rows := fields(kubectl(t, cp, "get", "nw", "kubectl-node"))
		want := [][]string{{"NAME", "DESIRED", "PRESENT", "PULLING", "FAILED", "PROGRESS", "AGE"},
			{"kubectl-node", "4", "2", "1", "1", "3.0", "MiB", "of", "16", "MiB", "(18%),", "9s", "left"}}
		checkTable(t, rows, want)
	})
	t.Run("explain", func(t *testing.T) {
		out := kubectl(t, cp, "explain", "imagewarm.spec")
		for _, want := range []string{"images", "nodeSelector", "pullPolicy", "refreshInterval", "imagePullSecrets", "priority", "suspend", "pullTimeout", "rollout", "is pulled by its digest"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl explain imagewarm.spec lacks %q:\n%s", want, out)
			}
		}
		out = kubectl(t, cp, "explain", "nodewarm.status.images")
		if !regexp.MustCompile(`state\s+<string>`).MatchString(out) || !strings.Contains(out, "Present") {
			t.Errorf("kubectl explain nodewarm.status.images does not document state:\n%s", out)
		}
	})
}

// checkTable compares kubectl's rows with want, cell by cell; cells beyond
// want's (the age) are not compared.
func checkTable(t *testing.T, rows, want [][]string) {
	t.Helper()
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %v", len(rows), len(want), rows)
	}
	for i := range want {
		if len(rows[i]) < len(want[i]) {
			t.Fatalf("row %d: got %v, want %v", i, rows[i], want[i])
		}
		for j := range want[i] {
			if rows[i][j] != want[i][j] {
				t.Errorf("row %d cell %d: got %q, want %q (row %v)", i, j, rows[i][j], want[i][j], rows[i])
			}
		}
	}
}
