package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warmer-dev/warmer/test/testbed"
)

// agentPod returns the agent DaemonSet's Pod spec as rendered.
func agentPod(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, _, err := unstructured.NestedMap(find(t, objs, "DaemonSet", "warmer-agent").Object, "spec", "template", "spec")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// container returns the first container of a Pod spec.
func container(t *testing.T, pod map[string]any) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(cs) == 0 {
		t.Fatal("no container in the Pod spec")
	}
	return cs[0].(map[string]any)
}

// strings of a list field of m, e.g. a container's args.
func stringList(t *testing.T, m map[string]any, fields ...string) []string {
	t.Helper()
	l, _, err := unstructured.NestedStringSlice(m, fields...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// hostPaths maps the agent's volumes to their host paths, and its mounts
// to their mount paths.
func hostPaths(t *testing.T, pod map[string]any) (volumes, mounts map[string]string) {
	t.Helper()
	volumes, mounts = map[string]string{}, map[string]string{}
	vs, _, _ := unstructured.NestedSlice(pod, "volumes")
	for _, v := range vs {
		p, _, _ := unstructured.NestedString(v.(map[string]any), "hostPath", "path")
		volumes[v.(map[string]any)["name"].(string)] = p
	}
	ms, _, _ := unstructured.NestedSlice(container(t, pod), "volumeMounts")
	for _, m := range ms {
		mounts[m.(map[string]any)["name"].(string)] = m.(map[string]any)["mountPath"].(string)
	}
	return volumes, mounts
}

// TestRuntimePresets checks that each runtime preset points the agent at
// that runtime's socket and mounts only its socket's folder (the socket
// itself where that folder is /run), read-only and recursively so where the
// node can, and that an explicit path overrides a preset.
func TestRuntimePresets(t *testing.T) {
	cases := []struct {
		flags         []string
		socket, mount string
	}{
		{nil, "/run/containerd/containerd.sock", "/run/containerd"},
		{[]string{"--set", "runtime.preset=crio"}, "/var/run/crio/crio.sock", "/var/run/crio"},
		{[]string{"--set", "runtime.preset=k3s"}, "/run/k3s/containerd/containerd.sock", "/run/k3s/containerd"},
		{[]string{"--set", "runtime.preset=rke2"}, "/run/k3s/containerd/containerd.sock", "/run/k3s/containerd"},
		{[]string{"--set", "runtime.preset=cri-dockerd"}, "/run/cri-dockerd.sock", "/run/cri-dockerd.sock"},
		{[]string{"--set", "runtime.preset=crio", "--set", "runtime.socketPath=/custom/run/crio.sock"}, "/custom/run/crio.sock", "/custom/run"},
		{[]string{"--set", "runtime.socketPath=/var/run/other.sock"}, "/var/run/other.sock", "/var/run/other.sock"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.flags, " "), func(t *testing.T) {
			pod := agentPod(t, helmTemplate(t, namespace, c.flags...))
			args := stringList(t, container(t, pod), "args")
			if want := "--container-runtime-endpoint=unix://" + c.socket; !slices.Contains(args, want) {
				t.Errorf("args %v lack %s", args, want)
			}
			volumes, mounts := hostPaths(t, pod)
			for name, path := range volumes {
				if mounts[name] != path {
					t.Errorf("volume %s: host path %s mounted at %s, want the same path", name, path, mounts[name])
				}
			}
			if len(volumes) != 1 || volumes["runtime-socket"] != c.mount {
				t.Errorf("host paths %v, want only runtime-socket at %s", volumes, c.mount)
			}
			ms, _, _ := unstructured.NestedSlice(container(t, pod), "volumeMounts")
			for _, m := range ms {
				m := m.(map[string]any)
				if m["readOnly"] != true || m["recursiveReadOnly"] != "IfPossible" {
					t.Errorf("mount %v: want readOnly and recursiveReadOnly IfPossible", m)
				}
			}
		})
	}
}

// TestUnknownPresetFails checks that a misspelt preset stops the render
// with a message naming the presets, rather than installing an agent that
// cannot reach its runtime.
func TestUnknownPresetFails(t *testing.T) {
	_, err := templateOutput(t, namespace, "--set", "runtime.preset=docker")
	if err == nil || !strings.Contains(err.Error(), "containerd, crio, k3s, rke2, cri-dockerd") {
		t.Errorf("runtime.preset=docker: got %v, want a failure naming the presets", err)
	}
}

// TestReleaseNamespace renders the chart into another namespace: every
// namespaced object, the bindings' subjects, the controller's
// leader-election namespace, the admission policy's user name and the
// ImageWarm policies' parameters follow it, so the policy keeps matching
// the agent and the operator's settings are found.
// agentMatch is the admission policies' match of the agent's requests.
const agentMatch = `request.userInfo.username.matches('^system:serviceaccount:[a-z0-9-]+:warmer-agent$')`

func TestReleaseNamespace(t *testing.T) {
	const ns = "ops"
	objs := helmTemplate(t, ns)
	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != ns {
			t.Errorf("%s is in namespace %s, want %s", id(o), o.GetNamespace(), ns)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			if got := s.(map[string]any)["namespace"]; got != ns {
				t.Errorf("%s: subject in namespace %v, want %s", id(o), got, ns)
			}
		}
	}
	for _, name := range []string{"warmer-agent-own-nodewarm", "warmer-agent-own-node-taint"} {
		policy := find(t, objs, "ValidatingAdmissionPolicy", name)
		conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		// The agent's account in any namespace (test/deploy
		// TestPoliciesInAnotherNamespace and TestInstall check that it
		// matches); the chart's own namespace need not be spelled out.
		if len(conds) != 1 || conds[0].(map[string]any)["expression"] != agentMatch {
			t.Errorf("policy %s's match conditions %v do not match the agent of every namespace", name, conds)
		}
	}
	ctrl, _, _ := unstructured.NestedSlice(find(t, objs, "Deployment", "warmer-controller").Object, "spec", "template", "spec", "containers")
	if args := stringList(t, ctrl[0].(map[string]any), "args"); !slices.Contains(args, "--leader-election-namespace="+ns) {
		t.Errorf("controller args %v do not elect in %s", args, ns)
	}
	if got := flowSchemaSubjects(t, objs); !slices.Equal(got, []string{ns + "/warmer-agent"}) {
		t.Errorf("the agents' FlowSchema matches service accounts %v, want %s/warmer-agent", got, ns)
	}
	for _, name := range []string{"warmer-imagewarm-cluster-levers", "warmer-imagewarm-registries"} {
		ref, _, _ := unstructured.NestedStringMap(find(t, objs, "ValidatingAdmissionPolicyBinding", name).Object, "spec", "paramRef")
		if ref["namespace"] != ns || ref["name"] != "warmer-admission" {
			t.Errorf("binding %s takes its parameters from %v, want ConfigMap warmer-admission in %s", name, ref, ns)
		}
	}
	find(t, objs, "ConfigMap", "warmer-admission")
}

// TestAdmissionValues checks that the admission values reach the ConfigMap
// the ImageWarm policies read: the registries one per line, the maximum
// pullTimeout as written.
func TestAdmissionValues(t *testing.T) {
	objs := helmTemplate(t, namespace, "--set", "admission.registries={docker.io,registry.example:5000}",
		"--set", "admission.maxPullTimeout=1h")
	data, _, _ := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "warmer-admission").Object, "data")
	want := map[string]string{"registries": "docker.io\nregistry.example:5000", "maxPullTimeout": "1h"}
	if !maps.Equal(data, want) {
		t.Errorf("ConfigMap warmer-admission holds %q, want %q", data, want)
	}
}

// flowSchemaSubjects lists the service accounts (namespace/name) the
// agents' FlowSchema matches.
func flowSchemaSubjects(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(find(t, objs, "FlowSchema", "warmer-agents").Object, "spec", "rules")
	var out []string
	for _, r := range rules {
		subjects, _, _ := unstructured.NestedSlice(r.(map[string]any), "subjects")
		for _, s := range subjects {
			name, _, _ := unstructured.NestedString(s.(map[string]any), "serviceAccount", "name")
			sns, _, _ := unstructured.NestedString(s.(map[string]any), "serviceAccount", "namespace")
			out = append(out, sns+"/"+name)
		}
	}
	return out
}

// TestFlowControlOff checks that flowControl.enabled=false leaves the
// agents to the cluster's own FlowSchemas: no FlowSchema or priority level
// is rendered.
func TestFlowControlOff(t *testing.T) {
	for _, o := range helmTemplate(t, namespace, "--set", "flowControl.enabled=false") {
		if k := o.GetKind(); k == "FlowSchema" || k == "PriorityLevelConfiguration" {
			t.Errorf("flowControl.enabled=false renders %s", id(o))
		}
	}
}

// TestValues checks that the values for image, flags, scheduling,
// resources and CRDs reach the objects.
func TestValues(t *testing.T) {
	objs := helmTemplate(t, namespace,
		"--set", "image.repository=registry.example/warmer,image.tag=v9.9.9,image.pullPolicy=Always",
		"--set", "agent.flags.registry-qps=0,agent.flags.serialize-image-pulls=true",
		"--set", "agent.extraArgs[0]=--zap-devel",
		"--set", "agent.priorityClassName=warm,agent.nodeSelector.pool=web",
		"--set", "agent.tolerations[0].key=dedicated,agent.tolerations[0].operator=Exists",
		"--set", "agent.resources.limits.memory=1Gi",
		"--set", "controller.replicas=1,controller.flags.min-status-interval=5s",
		"--set", "crds.keep=true")
	pod := agentPod(t, objs)
	c := container(t, pod)
	if c["image"] != "registry.example/warmer:v9.9.9" || c["imagePullPolicy"] != "Always" {
		t.Errorf("agent image %v, pull policy %v", c["image"], c["imagePullPolicy"])
	}
	// Flags sorted by name after the endpoint, extra arguments last; a
	// zero and a false are values, not "unset".
	wantArgs := []string{"agent", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
		"--registry-qps=0", "--serialize-image-pulls=true", "--zap-devel"}
	if args := stringList(t, c, "args"); !slices.Equal(args, wantArgs) {
		t.Errorf("agent args %v, want %v", args, wantArgs)
	}
	if pod["priorityClassName"] != "warm" {
		t.Errorf("priorityClassName %v", pod["priorityClassName"])
	}
	// A key set is added to the default selector, which keeps Linux.
	if sel, _, _ := unstructured.NestedStringMap(pod, "nodeSelector"); sel["pool"] != "web" || sel["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v, want pool=web and kubernetes.io/os=linux", sel)
	}
	if tols, _, _ := unstructured.NestedSlice(pod, "tolerations"); len(tols) != 1 || tols[0].(map[string]any)["key"] != "dedicated" {
		t.Errorf("tolerations %v, want only the one set", tols)
	}
	if mem, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); mem != "1Gi" {
		t.Errorf("agent memory limit %q, want 1Gi", mem)
	}
	deploy := find(t, objs, "Deployment", "warmer-controller")
	// Decoded from YAML through JSON, so a float64.
	if n, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas"); n != 1.0 {
		t.Errorf("controller replicas %v, want 1", n)
	}
	ctrl, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if args := stringList(t, ctrl[0].(map[string]any), "args"); !slices.Contains(args, "--min-status-interval=5s") {
		t.Errorf("controller args %v lack --min-status-interval=5s", args)
	}
	for _, name := range []string{"imagewarms.warmer.dev", "nodewarms.warmer.dev", "rolloutbounds.warmer.dev"} {
		crd := find(t, objs, "CustomResourceDefinition", name)
		if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("crds.keep=true: %s annotations %v", name, crd.GetAnnotations())
		}
	}
}

// TestDefaultTagIsAppVersion checks that the image tag defaults to the
// chart's appVersion, the warmer release the chart was made for.
func TestDefaultTagIsAppVersion(t *testing.T) {
	out, err := testbed.RunHelm(t, "show", "chart", chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	meta := testbed.DecodeObjects(t, "helm show chart", out)
	if len(meta) != 1 {
		t.Fatalf("helm show chart: %d documents", len(meta))
	}
	appVersion, _, _ := unstructured.NestedString(meta[0].Object, "appVersion")
	if appVersion == "" {
		t.Fatal("Chart.yaml has no appVersion")
	}
	c := container(t, agentPod(t, helmTemplate(t, namespace)))
	if want := "ghcr.io/warmer-dev/warmer:" + appVersion; c["image"] != want {
		t.Errorf("agent image %v, want %s", c["image"], want)
	}
}

// TestNoCRDs checks that crds.enabled=false leaves the CRDs out, for
// clusters that manage them apart.
func TestNoCRDs(t *testing.T) {
	for _, o := range helmTemplate(t, namespace, "--set", "crds.enabled=false") {
		if o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("crds.enabled=false renders %s", id(o))
		}
	}
}

// TestStartupTaintKey checks that agent.flags.startup-taint sets the key
// both in the agent's flags and in the admission policy that lets the
// agent remove that taint only.
func TestStartupTaintKey(t *testing.T) {
	const key = "example.com/not-yet"
	objs := helmTemplate(t, namespace, "--set", "agent.flags.startup-taint="+key)
	agent, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "warmer-agent").Object, "spec", "template", "spec", "containers")
	if args := stringList(t, agent[0].(map[string]any), "args"); !slices.Contains(args, "--startup-taint="+key) {
		t.Errorf("agent args %v do not set --startup-taint=%s", args, key)
	}
	vars, _, _ := unstructured.NestedSlice(find(t, objs, "ValidatingAdmissionPolicy", "warmer-agent-own-node-taint").Object, "spec", "variables")
	var got []string
	for _, v := range vars {
		if m := v.(map[string]any); m["name"] == "taint" {
			got = append(got, m["expression"].(string))
		}
	}
	if !slices.Equal(got, []string{"'" + key + "'"}) {
		t.Errorf("the node policy's taint variable is %q, want '%s'", got, key)
	}
}
