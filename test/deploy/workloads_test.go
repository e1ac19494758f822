package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

	t.Run("agent", func(t *testing.T) { checkAgent(t, bin, ds.Spec.Template.Spec) })
	t.Run("controller", func(t *testing.T) {
		pod := dep.Spec.Template.Spec
		checkPod(t, bin, pod, "warmer-controller")
		if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("does not run as non-root: %+v", sc)
		}
		if args := strings.Join(pod.Containers[0].Args, " "); !strings.Contains(args, "--leader-election-namespace="+systemNamespace) {
			t.Errorf("leader election outside %s, where its Role is: %s", systemNamespace, args)
		}
		if len(pod.Volumes) > 0 {
			t.Errorf("the controller mounts %+v; it needs nothing of the node", pod.Volumes)
		}
	})
	t.Run("one release image", func(t *testing.T) {
		checkReleaseImage(t, ds.Spec.Template.Spec.Containers[0].Image, dep.Spec.Template.Spec.Containers[0].Image)
	})
}

// TestRuntimeComponents checks each config/components/runtime-* in an
// overlay of config/default: the agent talks CRI on that runtime's socket
// and mounts its folder (or the socket itself) only, as for containerd.
// (TestApply has the API server accept them.)
func TestRuntimeComponents(t *testing.T) {
	entries, err := os.ReadDir(configDir(t, "components"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := runtimeComponents[e.Name()]; strings.HasPrefix(e.Name(), "runtime-") && !ok {
			t.Errorf("config/components/%s is not tested: add it to runtimeComponents", e.Name())
		}
	}
	for name, socket := range runtimeComponents {
		t.Run(name, func(t *testing.T) {
			for _, o := range renderDir(t, overlay(t, name)) {
				if o.GetKind() == "DaemonSet" {
					var ds appsv1.DaemonSet
					fromUnstructured(t, o, &ds)
					checkRuntimeMount(t, ds.Spec.Template.Spec, socket)
				}
			}
		})
	}
}

// checkAgent checks the agent's Pod: the shared hardening, every taint
// tolerated, no host namespace, its identity from the downward API, the
// runtime's socket as its only mount, and probes that make it Ready soon.
func checkAgent(t *testing.T, bin string, pod corev1.PodSpec) {
	t.Helper()
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
	for name, field := range map[string]string{"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"} {
		if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
			return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field
		}) {
			t.Errorf("%s does not come from %s: %+v", name, field, env)
		}
	}
	checkRuntimeMount(t, pod, "/run/containerd/containerd.sock")
	checkProbes(t, pod.Containers[0])
}

// checkRuntimeMount checks that the agent mounts nothing of the node but
// the runtime socket's folder (or the socket itself), at the node's path,
// read-only and recursively so where the node can, and talks CRI on that
// socket.
func checkRuntimeMount(t *testing.T, pod corev1.PodSpec, socket string) {
	t.Helper()
	if want := "--container-runtime-endpoint=unix://" + socket; !slices.Contains(pod.Containers[0].Args, want) {
		t.Errorf("args %v lack %s", pod.Containers[0].Args, want)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].HostPath == nil {
		t.Fatalf("volumes %+v, want one hostPath: the runtime's socket", pod.Volumes)
	}
	v := pod.Volumes[0]
	host := v.HostPath.Path
	if host != socket && host != filepath.Dir(socket) {
		t.Errorf("host path %s, want the socket %s or its folder", host, socket)
	}
	if host == "/run" || host == "/var/run" || strings.HasPrefix(host, "/var/lib") {
		t.Errorf("host path %s exposes more than the runtime's socket", host)
	}
	mounts := pod.Containers[0].VolumeMounts
	if len(mounts) != 1 || mounts[0].Name != v.Name {
		t.Fatalf("mounts %+v, want only %s", mounts, v.Name)
	}
	m := mounts[0]
	if m.MountPath != host || !m.ReadOnly || m.RecursiveReadOnly == nil || *m.RecursiveReadOnly != corev1.RecursiveReadOnlyIfPossible {
		t.Errorf("mount %+v: want %s read-only, recursively if possible", m, host)
	}
}

// checkProbes checks that the agent is Ready within two seconds of its
// probe server listening (it listens once the runtime answers): a startup
// probe and a readiness probe whose periods add up to at most that, the
// readiness one on /readyz, and room for a slow runtime before a restart.
func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	s, r := c.StartupProbe, c.ReadinessProbe
	if s == nil || r == nil || c.LivenessProbe == nil {
		t.Fatalf("probes: startup %v, readiness %v, liveness %v; want all three", s, r, c.LivenessProbe)
	}
	if s.PeriodSeconds+r.PeriodSeconds > 2 || s.InitialDelaySeconds+r.InitialDelaySeconds > 0 {
		t.Errorf("startup every %ds after %ds, readiness every %ds after %ds: Ready may come later than 2s after listening",
			s.PeriodSeconds, s.InitialDelaySeconds, r.PeriodSeconds, r.InitialDelaySeconds)
	}
	if r.HTTPGet == nil || r.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want /readyz (ready when the runtime answers)", r.ProbeHandler)
	}
	if grace := s.PeriodSeconds * s.FailureThreshold; grace < 60 {
		t.Errorf("the startup probe restarts the agent after %ds; a booting node's runtime may need longer", grace)
	}
}

// releaseTag is what a release tag looks like: vX.Y.Z, maybe a pre-release.
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// checkReleaseImage checks that both workloads run one versioned release
// image: never latest (whose implicit pull policy is Always and whose
// content moves), and the checked-out tag itself when HEAD is a release.
func checkReleaseImage(t *testing.T, images ...string) {
	t.Helper()
	for _, img := range images {
		if img != images[0] {
			t.Errorf("the workloads run %v, want one image", images)
		}
	}
	repo, tag, ok := strings.Cut(images[0], ":")
	if !ok || repo != "ghcr.io/warmer-dev/warmer" || !releaseTag.MatchString(tag) {
		t.Fatalf("image %q, want ghcr.io/warmer-dev/warmer:vX.Y.Z", images[0])
	}
	cmd := exec.Command("git", "describe", "--tags", "--exact-match", "--match", "v*")
	cmd.Dir = testbed.RepoRoot(t)
	if out, err := cmd.Output(); err == nil && strings.TrimSpace(string(out)) != tag {
		t.Errorf("HEAD is release %s, but config/default installs %s: run make set-release", strings.TrimSpace(string(out)), tag)
	}
}

// checkPod checks what both workloads share: the service account, a
// hardened container and flags the binary accepts.
func checkPod(t *testing.T, bin string, pod corev1.PodSpec, serviceAccount string) {
	t.Helper()
	if pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v, want kubernetes.io/os: linux", pod.NodeSelector)
	}
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
