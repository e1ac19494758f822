package rollout

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestControllerPodWrites: with its own service-account token, the
// controller may remove warmer's gate and set its own Pod condition, and
// nothing else of a Pod (warmer-controller-pods), nor delete one (RBAC).
func TestControllerPodWrites(t *testing.T) {
	const ns = "writes"
	ctx := context.Background()
	fleet.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	cfg, err := clientcmd.BuildConfigFromFlags("", fleet.CP.ControllerKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	as, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Not opted in (no label): the controller leaves it alone, the test
	// acts as the controller.
	pod := newPod(ns, "target", "target", "registry.invalid/app:v1", "")
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/other"}, {Name: gate.GateName}}
	fleet.Create(t, pod)
	tolerations := len(pod.Spec.Tolerations) // the API server's defaults

	denied := []struct{ name, patch string }{
		{"a label", `[{"op":"add","path":"/metadata/labels/owned","value":"yes"}]`},
		{"another gate", `[{"op":"remove","path":"/spec/schedulingGates/0"}]`},
		{"the image", `[{"op":"replace","path":"/spec/containers/0/image","value":"registry.invalid/evil:v1"}]`},
		{"a toleration", `[{"op":"add","path":"/spec/tolerations/-","value":{"operator":"Exists"}}]`},
	}
	for _, d := range denied {
		err := as.Patch(ctx, pod, client.RawPatch(types.JSONPatchType, []byte(d.patch)))
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "warmer-controller-pods") {
			t.Errorf("changing %s: %v; want a refusal by warmer-controller-pods", d.name, err)
		}
	}
	status := `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
	if err := as.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, []byte(status))); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("setting Ready: %v; want a refusal", err)
	}
	own := `{"status":{"conditions":[{"type":"` + gate.ConditionWarm + `","status":"True","reason":"Warm"}]}}`
	if err := as.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, []byte(own))); err != nil {
		t.Errorf("setting %s: %v", gate.ConditionWarm, err)
	}
	remove := `[{"op":"test","path":"/spec/schedulingGates/1/name","value":"` + gate.GateName + `"},{"op":"remove","path":"/spec/schedulingGates/1"}]`
	if err := as.Patch(ctx, pod, client.RawPatch(types.JSONPatchType, []byte(remove))); err != nil {
		t.Errorf("removing %s: %v", gate.GateName, err)
	}
	if err := as.Delete(ctx, pod); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a Pod: %v; want forbidden", err)
	}
	var got corev1.Pod
	if err := fleet.CP.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.SchedulingGates) != 1 || got.Spec.SchedulingGates[0].Name != "example.com/other" || got.Labels["owned"] != "" ||
		got.Spec.Containers[0].Image != "registry.invalid/app:v1" || len(got.Spec.Tolerations) != tolerations {
		t.Errorf("the Pod after the controller's writes: gates %v labels %v image %s tolerations %v",
			got.Spec.SchedulingGates, got.Labels, got.Spec.Containers[0].Image, got.Spec.Tolerations)
	}
}
