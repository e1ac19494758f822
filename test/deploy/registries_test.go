package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// registriesPolicyName is the policy that keeps spec.images to the
// registries the operator allows.
const registriesPolicyName = "warmer-imagewarm-registries"

// admissionSettings is the operator's ConfigMap the ImageWarm policies
// read, in warmer's namespace.
var admissionSettings = types.NamespacedName{Namespace: systemNamespace, Name: "warmer-admission"}

// TestRegistryAllowlist installs config/default, whose registry list
// allows every host, then sets a list as an operator would and creates
// ImageWarms as a namespace's user: images of the listed hosts are
// allowed (Docker Hub's short names as docker.io, hosts in any case),
// others refused with a message naming the image, the host and the
// ConfigMap; a port is part of the host; a namespace's annotation adds
// hosts there only; an update is refused only for the images it adds;
// an empty list allows nothing, and a missing ConfigMap refuses every
// ImageWarm.
func TestRegistryAllowlist(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	ctx := context.Background()
	const plain, extra = "team-plain", "team-extra"
	for ns, annotations := range map[string]map[string]string{plain: nil, extra: {"warmer.dev/registries": "localhost:5000, [FD00::1]:5000\nregistry.team.example"}} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: annotations}}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(ns, name string, images ...string) func(context.Context, client.WithWatch) error {
		return func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, build.ImageWarm(ns, name, build.Images(images...)))
		}
	}
	admin := clientAs(t, cp, rest.ImpersonationConfig{})
	runChecks(t, admin, []check{
		{name: "any host, as shipped", want: allowed, do: create(plain, "internal", "10.0.0.1:2375/probe:v1", "nginx:1.27")},
	})

	setAdmission(t, cp, "registries", "docker.io, ghcr.io\n  registry.example:5000")
	waitForRegistries(t, cp, plain, "10.0.0.1:2375/probe:v1")
	refusal := func(image, host string) string {
		return "spec.images: " + image + " is pulled from registry " + host + ", which namespace " + plain +
			" may not use (allowed: docker.io, ghcr.io, registry.example:5000): take the image from an allowed registry, or ask a cluster operator to add " +
			host + " to key registries of ConfigMap warmer-admission in namespace warmer-system, or to the annotation warmer.dev/registries of namespace " + plain
	}
	runChecks(t, admin, []check{
		{name: "Docker Hub short names", want: allowed, do: create(plain, "hub", "nginx:1.27", "library/redis:7", "docker.io/library/busybox:1.36", "index.docker.io/library/alpine:3")},
		{name: "a listed host, in capitals", want: allowed, do: create(plain, "ghcr", "GHCR.io/team/app:v1")},
		{name: "a listed host with its port", want: allowed, do: create(plain, "port", "registry.example:5000/app:v1")},
		{name: "a listed host on another port", want: deniedByPolicy, do: create(plain, "port-other", "registry.example:6000/app:v1"), msg: refusal("registry.example:6000/app:v1", "registry.example:6000")},
		{name: "a listed host's default port, only its :5000 listed", want: deniedByPolicy, do: create(plain, "port-none", "registry.example/app:v1"), msg: "registry registry.example,"},
		{name: "an internal address", want: deniedByPolicy, do: create(plain, "internal-ip", "nginx:1.27", "10.0.0.1:2375/probe:v1"), msg: refusal("10.0.0.1:2375/probe:v1", "10.0.0.1:2375")},
		{name: "localhost", want: deniedByPolicy, do: create(plain, "localhost", "localhost/app:v1"), msg: "registry localhost,"},
		{name: "IPv6", want: deniedByPolicy, do: create(plain, "ipv6", "[fd00::1]:5000/app:v1"), msg: "registry [fd00::1]:5000,"},
		{name: "two refused images", want: deniedByPolicy, do: create(plain, "two", "a.example/app:v1", "b.example/app:v1"), msg: "(and 1 more image not allowed)"},
		{name: "the namespace's hosts, elsewhere", want: deniedByPolicy, do: create(plain, "team", "registry.team.example/app:v1")},
		{name: "the namespace's hosts, there", want: allowed, do: create(extra, "team", "registry.team.example/app:v1", "localhost:5000/app:v1", "[fd00::1]:5000/app:v1", "nginx:1.27")},
		{name: "an update that keeps a host no longer listed", want: allowed, do: updateWarm(types.NamespacedName{Namespace: plain, Name: "internal"}, func(w *warmv1.ImageWarm) {
			w.Spec.Images = append(w.Spec.Images, "ghcr.io/team/app:v2")
		})},
		{name: "an update that adds a host not listed", want: deniedByPolicy, do: updateWarm(types.NamespacedName{Namespace: plain, Name: "internal"}, func(w *warmv1.ImageWarm) {
			w.Spec.Images = append(w.Spec.Images, "10.0.0.2:80/probe:v1")
		}), msg: refusal("10.0.0.2:80/probe:v1", "10.0.0.2:80")},
	})

	setAdmission(t, cp, "registries", "")
	waitForRegistries(t, cp, plain, "nginx:1.27")
	runChecks(t, admin, []check{
		{name: "an empty list", want: deniedByPolicy, do: create(plain, "none", "nginx:1.27"), msg: "may not use (allowed: none)"},
		{name: "an empty list, the namespace's hosts", want: allowed, do: create(extra, "only", "registry.team.example/app:v2")},
	})

	if err := cp.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: admissionSettings.Namespace, Name: admissionSettings.Name}}); err != nil {
		t.Fatal(err)
	}
	// The API server's words, not the policy's: they name the binding
	// (of either ImageWarm policy), whose paramRef names the ConfigMap.
	const missing = "' denied request: failed to configure binding: no params found"
	testbed.Eventually(t, 30*time.Second, "the ConfigMap's absence in force", func() error {
		err := cp.Client.Create(ctx, build.ImageWarm(extra, "probe", build.Images("registry.team.example/app:v2")), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "with binding 'warmer-imagewarm-") {
			return fmt.Errorf("got %w, want a refusal naming the binding", err)
		}
		t.Logf("without the ConfigMap: %v (reason %s)", err, apierrors.ReasonForError(err))
		return nil
	})
}

// setAdmission sets key of the operator's ConfigMap to value, as the
// cluster's operator would.
func setAdmission(t *testing.T, cp *testbed.ControlPlane, key, value string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := cp.Client.Get(context.Background(), admissionSettings, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[key] = value
	if err := cp.Client.Update(context.Background(), &cm); err != nil {
		t.Fatal(err)
	}
}

// waitForRegistries waits until the API server's copy of the ConfigMap
// refuses image in namespace ns: the policy reads its parameters from a
// cache a moment behind the update.
func waitForRegistries(t *testing.T, cp *testbed.ControlPlane, ns, image string) {
	t.Helper()
	probe := build.ImageWarm(ns, "registries-probe", build.Images(image))
	testbed.Eventually(t, 30*time.Second, "the registry list in force", func() error {
		err := cp.Client.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		if got, _ := verdict(err); got != deniedByPolicy {
			return fmt.Errorf("%s got %w, want a refusal", image, err)
		}
		return nil
	})
}
