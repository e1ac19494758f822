package chart

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warmer-dev/warmer/test/testbed"
)

// helmLabels are the labels the chart adds to the metadata of every object
// it makes, by Helm's conventions: who manages the object, and which
// release, chart and application version it came from. config/ has no
// release, so the comparison leaves exactly these out. Selectors and Pod
// templates carry none of them and are compared as they are: they must be
// the same for an install to move between the two paths.
var helmLabels = []string{
	"app.kubernetes.io/instance",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/version",
	"helm.sh/chart",
}

// clusterScoped are the cluster-scoped kinds either path renders. kubectl
// kustomize stamps its namespace on ValidatingAdmissionPolicy and its
// binding too (its built-in schema predates them), a field the API server
// drops for cluster-scoped kinds; the chart does not write it. So the
// comparison leaves out metadata.namespace of these kinds, on both sides.
var clusterScoped = []string{
	"ClusterRole",
	"ClusterRoleBinding",
	"CustomResourceDefinition",
	"FlowSchema",
	"PriorityLevelConfiguration",
	"ValidatingAdmissionPolicy",
	"ValidatingAdmissionPolicyBinding",
}

// TestChartMatchesConfigDefault renders the chart with its default values
// as release warmer in warmer-system and config/default with kubectl
// kustomize, and compares them object by object: the CRDs, RBAC, the
// admission policy, the workloads and the Services. The only object the
// chart leaves out is the Namespace: Helm installs into a namespace that
// exists or that --create-namespace makes.
func TestChartMatchesConfigDefault(t *testing.T) {
	want := kustomize(t, "default")
	want = slices.DeleteFunc(want, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" && o.GetName() == namespace
	})
	got := helmTemplate(t, namespace)
	for _, o := range got {
		if o.GetKind() == "Namespace" {
			t.Errorf("the chart renders Namespace %s; the release's namespace is Helm's to make", o.GetName())
		}
	}
	compare(t, "config/default", want, got)
}

// TestChartPodMonitorsMatchConfigPrometheus checks that podMonitor.enabled
// adds what config/prometheus adds to config/default (the PodMonitors and
// the controller's scraper identity), and that the default values add
// nothing of it.
func TestChartPodMonitorsMatchConfigPrometheus(t *testing.T) {
	monitors := func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
		return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetKind() != "PodMonitor" && !strings.HasPrefix(o.GetName(), "warmer-metrics-scraper")
		})
	}
	if n := len(monitors(helmTemplate(t, namespace))); n != 0 {
		t.Errorf("the default values render %d PodMonitors, want none (podMonitor.enabled is off by default)", n)
	}
	want := monitors(kustomize(t, "prometheus"))
	if len(want) == 0 {
		t.Fatal("config/prometheus renders no PodMonitor")
	}
	compare(t, "config/prometheus", want, monitors(helmTemplate(t, namespace, "--set", "podMonitor.enabled=true")))
}

// runtimeComponents are the chart's runtime presets other than the
// default, each with the component of config/components that sets up the
// same runtime on config/default (k3s and RKE2 share one).
var runtimeComponents = map[string]string{
	"crio":        "runtime-crio",
	"k3s":         "runtime-k3s",
	"rke2":        "runtime-k3s",
	"cri-dockerd": "runtime-cri-dockerd",
}

// TestChartPresetsMatchComponents checks that each runtime preset renders
// the agent DaemonSet that config/default renders with the matching
// config/components/runtime-* in an overlay, and that every such component
// has a preset: the two install paths support the same runtimes the same
// way.
func TestChartPresetsMatchComponents(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(testbed.RepoRoot(t), "config", "components", "runtime-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !slices.Contains(slices.Collect(maps.Values(runtimeComponents)), filepath.Base(d)) {
			t.Errorf("config/components/%s has no runtime preset in the chart", filepath.Base(d))
		}
	}
	for _, preset := range sortedKeys(runtimeComponents) {
		component := runtimeComponents[preset]
		t.Run(preset, func(t *testing.T) {
			want := daemonSets(kustomizeWith(t, "default", "components/"+component))
			got := daemonSets(helmTemplate(t, namespace, "--set", "runtime.preset="+preset))
			compare(t, "config/default with "+component, want, got)
		})
	}
}

// TestChartCredentialProvidersMatchComponent checks that
// credentialProviders.enabled renders the agent DaemonSet that
// config/default renders with config/components/credential-providers:
// the kubelet's two flags, the two read-only mounts at the same paths and
// the node's CA certificates; with hostFiles, what
// credential-providers-azure adds.
func TestChartCredentialProvidersMatchComponent(t *testing.T) {
	want := daemonSets(kustomizeWith(t, "default", "components/credential-providers"))
	got := daemonSets(helmTemplate(t, namespace, "--set", "credentialProviders.enabled=true"))
	compare(t, "config/default with credential-providers", want, got)
	args := stringList(t, container(t, agentPod(t, got)), "args")
	for _, flag := range []string{"--image-credential-provider-config=", "--image-credential-provider-bin-dir="} {
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, flag) }) {
			t.Errorf("agent args %v lack %s", args, flag)
		}
	}
	t.Run("azure", func(t *testing.T) {
		want := daemonSets(kustomizeWith(t, "default", "components/credential-providers", "components/credential-providers-azure"))
		got := daemonSets(helmTemplate(t, namespace, "--set", "credentialProviders.enabled=true",
			"--set", "credentialProviders.hostFiles={/etc/kubernetes/azure.json}"))
		compare(t, "config/default with credential-providers and credential-providers-azure", want, got)
	})
	if args := stringList(t, container(t, agentPod(t, helmTemplate(t, namespace))), "args"); slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--image-credential-provider")
	}) {
		t.Errorf("the default values pass %v; credential providers are off by default", args)
	}
}

func daemonSets(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() != "DaemonSet" })
}

// compare fails the test for every object only one side renders and for
// every difference between the two renderings of an object, after
// normalize.
func compare(t *testing.T, source string, want, got []*unstructured.Unstructured) {
	t.Helper()
	wantByID, gotByID := byID(want), byID(got)
	for _, k := range sortedKeys(wantByID) {
		g, ok := gotByID[k]
		if !ok {
			t.Errorf("%s renders %s; the chart does not", source, k)
			continue
		}
		for _, d := range diff(normalize(wantByID[k]), normalize(g), "") {
			t.Errorf("%s: %s", k, d)
		}
	}
	for _, k := range sortedKeys(gotByID) {
		if _, ok := wantByID[k]; !ok {
			t.Errorf("the chart renders %s; %s does not", k, source)
		}
	}
}

// normalize returns o's content without what legitimately differs between
// the chart and config/ (helmLabels, clusterScoped).
func normalize(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	if labels := c.GetLabels(); labels != nil {
		for _, l := range helmLabels {
			delete(labels, l)
		}
		c.SetLabels(labels)
	}
	if slices.Contains(clusterScoped, c.GetKind()) {
		c.SetNamespace("")
	}
	return c.Object
}

func byID(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		n := o.DeepCopy()
		if slices.Contains(clusterScoped, n.GetKind()) {
			n.SetNamespace("")
		}
		m[id(n)] = o
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diff lists where want and got differ, by field path, as decoded from
// YAML (maps, lists, strings, numbers, booleans).
func diff(want, got any, path string) []string {
	wm, wIsMap := want.(map[string]any)
	gm, gIsMap := got.(map[string]any)
	if wIsMap && gIsMap {
		var out []string
		keys := sortedKeys(wm)
		for _, k := range sortedKeys(gm) {
			if _, ok := wm[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			out = append(out, diff(wm[k], gm[k], path+"."+k)...)
		}
		return out
	}
	wl, wIsList := want.([]any)
	gl, gIsList := got.([]any)
	if wIsList && gIsList {
		var out []string
		for i := range max(len(wl), len(gl)) {
			out = append(out, diff(at(wl, i), at(gl, i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: config/ has %s, the chart %s", path, show(want), show(got))}
}

// at is l[i], or nil past its end.
func at(l []any, i int) any {
	if i < len(l) {
		return l[i]
	}
	return nil
}

// show prints a value of either side, or says it is absent.
func show(v any) string {
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("%#v", v)
}

// featuresOff are the values that turn off every feature with permissions
// of its own, and the kustomize components that do the same, in the order
// that renders the agent's flags in the chart's (alphabetical) order.
var (
	featuresOffValues = []string{"--set-string", "agent.flags.startup-taint=", "--set-string", "agent.flags.kubelet-address=",
		"--set-string", "agent.flags.image-fs-unknown=pull",
		"--set", "controller.flags.images-from-kinds=none"}
	featuresOffComponents = []string{"components/without-images-from", "components/without-kubelet-stats", "components/without-startup-taint"}
)

// TestChartFeaturesOffMatchComponents checks that the chart with the startup
// taint, kubelet stats and imagesFrom turned off by their flags renders what
// config/default renders with config/components/without-*: the same
// objects, none of the features' roles or the taint's admission policy, and
// the flags that turn them off.
func TestChartFeaturesOffMatchComponents(t *testing.T) {
	want := kustomizeWith(t, "default", featuresOffComponents...)
	want = slices.DeleteFunc(want, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" && o.GetName() == namespace
	})
	got := helmTemplate(t, namespace, featuresOffValues...)
	compare(t, "config/default without its features", want, got)
	for _, o := range got {
		switch id(o) {
		case "ClusterRole/warmer-agent-startup-taint", "ClusterRole/warmer-agent-kubelet-stats",
			"ClusterRole/warmer-controller-images-from", "ValidatingAdmissionPolicy/warmer-agent-own-node-taint",
			"ValidatingAdmissionPolicy/warmer-agent-own-node-status":
			t.Errorf("features off, the chart still renders %s", id(o))
		}
	}
}

// TestChartPullSecretsClusterWide checks the chart's two ways of letting
// the controller read pull secrets against kustomize's: by default the
// ClusterRole is installed unbound (each namespace opts in), and
// pullSecrets.readScope=cluster renders what the pull-secrets-cluster-wide
// component adds, its one ClusterRoleBinding; any other value is refused.
func TestChartPullSecretsClusterWide(t *testing.T) {
	const binding = "ClusterRoleBinding/warmer-controller-pull-secrets"
	if slices.ContainsFunc(helmTemplate(t, namespace), func(o *unstructured.Unstructured) bool { return id(o) == binding }) {
		t.Errorf("the default chart binds the pull-secret reader cluster-wide; want it unbound")
	}
	want := kustomizeWith(t, "default", "components/pull-secrets-cluster-wide")
	want = slices.DeleteFunc(want, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" && o.GetName() == namespace
	})
	got := helmTemplate(t, namespace, "--set", "pullSecrets.readScope=cluster")
	compare(t, "config/default with pull-secrets-cluster-wide", want, got)
	if !slices.ContainsFunc(got, func(o *unstructured.Unstructured) bool { return id(o) == binding }) {
		t.Errorf("readScope=cluster renders no %s", binding)
	}
	if _, err := templateOutput(t, namespace, "--set", "pullSecrets.readScope=everywhere"); err == nil || !strings.Contains(err.Error(), "want namespaces or cluster") {
		t.Errorf("readScope=everywhere: %v, want the chart to refuse it", err)
	}
}

// TestChartNetworkPolicyMatchesComponent checks that networkPolicy.enabled
// renders the NetworkPolicy config/components/metrics-network-policy adds,
// and that the default values render none.
func TestChartNetworkPolicyMatchesComponent(t *testing.T) {
	policies := func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
		return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() != "NetworkPolicy" })
	}
	if n := len(policies(helmTemplate(t, namespace))); n != 0 {
		t.Errorf("the default values render %d NetworkPolicies, want none", n)
	}
	want := policies(kustomizeWith(t, "default", "components/metrics-network-policy"))
	if len(want) != 1 {
		t.Fatalf("config/components/metrics-network-policy adds %d NetworkPolicies, want 1", len(want))
	}
	compare(t, "config/default with metrics-network-policy", want, policies(helmTemplate(t, namespace, "--set", "networkPolicy.enabled=true")))
}

// TestChartWarmGateMatchesComponent checks that warmGate.enabled renders
// what config/default renders with config/components/warm-gate (the
// admission policies, the controller's Pod roles, its flag and POD_UID),
// and that the default values render none of it.
func TestChartWarmGateMatchesComponent(t *testing.T) {
	if slices.ContainsFunc(helmTemplate(t, namespace), func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "MutatingAdmissionPolicy" || id(o) == "ClusterRole/warmer-controller-warm-gate"
	}) {
		t.Errorf("the default chart renders the warm gate; want it off")
	}
	want := kustomizeWith(t, "default", "components/warm-gate")
	want = slices.DeleteFunc(want, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" && o.GetName() == namespace
	})
	got := helmTemplate(t, namespace, "--set", "warmGate.enabled=true")
	compare(t, "config/default with warm-gate", want, got)
	if !slices.ContainsFunc(got, func(o *unstructured.Unstructured) bool { return id(o) == "MutatingAdmissionPolicy/warmer-warm-gate" }) {
		t.Errorf("warmGate.enabled renders no MutatingAdmissionPolicy")
	}
}
