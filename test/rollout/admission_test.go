package rollout

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmer-dev/warmer/controllers/gate"
)

// TestGateDeadlineAdmission holds the policy warmer-warm-gate-deadline to
// the controller's own reading of the annotation (gate.ValidDeadline): a
// new gated Pod is refused, with a message naming the annotation, exactly
// when the controller would not take its deadline as written. Pods that
// are not gated may carry any value.
func TestGateDeadlineAdmission(t *testing.T) {
	const ns = "deadline-admission"
	fleet.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	values := []string{"0", "0s", "-0s", "+1m", "90s", "15m", "1h", "60m", "3600s", "1h0m0s", "1.5m", ".5h", "1µs", "1μs",
		"", "61m", "1h1s", "2h", "-1m", "10", "1d", "soon", "1e3s", " 1m", "1m ",
		// Overflows a duration: refused too, by the policy's failure to
		// evaluate, with a message of the API server's.
		strings.Repeat("9", 100) + "s"}
	for _, v := range values {
		for _, gated := range []bool{true, false} {
			iw := ""
			if gated {
				iw = "web"
			}
			pod := newPod(ns, "", "admission", "registry.invalid/a:v1", iw)
			pod.GenerateName, pod.Annotations = "admission-", map[string]string{gate.AnnotationDeadline: v}
			err := fleet.CP.Client.Create(context.Background(), pod, client.DryRunAll)
			wantRefused := gated && !gate.ValidDeadline(v)
			overflow := len(v) > 64
			switch {
			case wantRefused && overflow && err == nil:
				t.Errorf("gated Pod with deadline %q admitted", v)
			case wantRefused && overflow:
			case wantRefused && !apierrors.IsInvalid(err):
				t.Errorf("gated Pod with deadline %q: got %v, want refused as invalid", v, err)
			case wantRefused && !strings.Contains(err.Error(), "annotation "+gate.AnnotationDeadline+"=") || wantRefused && !strings.Contains(err.Error(), "from 0 to 1h"):
				t.Errorf("deadline %q refused with %q, which does not say why", v, err)
			case !wantRefused && err != nil:
				t.Errorf("Pod (gated %v) with deadline %q refused: %v", gated, v, err)
			}
		}
	}
}
