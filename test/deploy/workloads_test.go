package deploy

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestWorkloads checks what the agent DaemonSet and the controller
// Deployment promise, so an edit cannot quietly drop it: hardening, the
// service accounts RBAC binds, the node name, and flags the binary
// accepts.
func TestWorkloads(t *testing.T) {
	var ds appsv1.DaemonSet
	var dep appsv1.Deployment
	for _, o := range render(t, "default") {
		switch o.GetKind() {
		case "DaemonSet":
			fromUnstructured(t, o, &ds)
		case "Deployment":
			fromUnstructured(t, o, &dep)
		}
	}
	bin := testbed.BuildWarmer(t)

	t.Run("agent", func(t *testing.T) {
		pod := ds.Spec.Template.Spec
		checkPod(t, bin, pod, "warmer-agent")
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
			return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
		}) {
			t.Errorf("does not tolerate every taint: %+v", pod.Tolerations)
		}
		if pod.HostNetwork || pod.HostPID || pod.HostIPC {
			t.Error("uses the host's network, PID or IPC namespace")
		}
		env := pod.Containers[0].Env
		if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}) {
			t.Errorf("NODE_NAME does not come from spec.nodeName: %+v", env)
		}
	})
	t.Run("controller", func(t *testing.T) {
		pod := dep.Spec.Template.Spec
		checkPod(t, bin, pod, "warmer-controller")
		if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("does not run as non-root: %+v", sc)
		}
		if args := strings.Join(pod.Containers[0].Args, " "); !strings.Contains(args, "--leader-election-namespace="+systemNamespace) {
			t.Errorf("leader election outside %s, where its Role is: %s", systemNamespace, args)
		}
	})
}

// checkPod checks what both workloads share: the service account, a
// hardened container and flags the binary accepts.
func checkPod(t *testing.T, bin string, pod corev1.PodSpec, serviceAccount string) {
	t.Helper()
	if pod.ServiceAccountName != serviceAccount {
		t.Errorf("service account %q, want %q", pod.ServiceAccountName, serviceAccount)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.Privileged == nil || *sc.Privileged:
		t.Error("privileged not set to false")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation not set to false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem not read-only")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want all dropped and none added", sc.Capabilities)
	}
	if p := pod.SecurityContext; p == nil || p.SeccompProfile == nil || p.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("no RuntimeDefault seccomp profile")
	}
	// --help after the manifest's arguments exits 0 only if every one of
	// them parses.
	if out, err := exec.Command(bin, append(slices.Clone(c.Args), "--help")...).CombinedOutput(); err != nil {
		t.Errorf("warmer %s: %v\n%s", strings.Join(c.Args, " "), err, out)
	}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s/%s: %v", u.GetKind(), u.GetName(), err)
	}
}
