package plan

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func warm(ns, name string, sel map[string]warmv1.LabelValue, images ...string) warmv1.ImageWarm {
	iw := warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1}}
	for _, img := range images {
		iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(img))
	}
	if sel != nil {
		iw.Spec.NodeSelector = &warmv1.NodeSelector{MatchLabels: sel}
	}
	return iw
}

// TestDesiredImages checks how the ImageWarms matching a node merge into
// the set of images it must hold.
func TestDesiredImages(t *testing.T) {
	node := map[string]string{"pool": "web", "zone": "a"}
	suspended := warm("b", "paused", nil, "redis:7")
	suspended.Spec.Suspend = true
	always := warm("a", "always", nil, "nginx:1.27")
	always.Spec.PullPolicy = warmv1.PullAlways
	always.Spec.RefreshInterval = &metav1.Duration{Duration: 10 * time.Minute}
	always.Spec.Priority = 50
	always.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	deleting := warm("a", "deleting", nil, "busybox:1.36")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	warms := []warmv1.ImageWarm{
		warm("a", "web", map[string]warmv1.LabelValue{"pool": "web"}, "nginx:1.27", "docker.io/library/nginx:1.27", "redis:7"),
		warm("a", "batch", map[string]warmv1.LabelValue{"pool": "batch"}, "postgres:16"),
		suspended, always, deleting,
	}
	d, bad := desiredImages("", node, warms)
	if len(bad) != 0 {
		t.Fatalf("bad selectors: %v", bad)
	}
	// Namespace a names a pull secret for nginx: its entry is its own.
	if got := d.Keys(); fmt.Sprint(got) != "[docker.io/library/nginx:1.27 a docker.io/library/redis:7]" {
		t.Fatalf("desired %q", got)
	}
	nginx, redis := d.images["docker.io/library/nginx:1.27 a"], d.images["docker.io/library/redis:7"]
	if nginx.priority != 50 || nginx.refresh != 10*time.Minute || len(nginx.secrets) != 1 || nginx.suspended {
		t.Errorf("nginx merged wrongly: %+v", nginx)
	}
	if len(nginx.warms) != 2 || nginx.warms[0].Name != "always" || nginx.warms[1].Name != "web" {
		t.Errorf("nginx wanted by %v, want a/always and a/web once each", nginx.warms)
	}
	if redis.suspended || len(redis.warms) != 2 {
		t.Errorf("redis is wanted by an active ImageWarm too: %+v", redis)
	}
	if len(d.warms) != 3 { // always, paused, web; not batch (selector), not deleting
		t.Errorf("warms %v", d.warms)
	}
}

// TestDesiredResolvedImages checks that images resolved from workloads
// are wanted as if the spec listed them, that the agent echoes the hash
// of the set it acts on, and that a new set under the same generation is
// taken at once by the memo.
func TestDesiredResolvedImages(t *testing.T) {
	node := map[string]string{"pool": "web"}
	from := warm("a", "from", nil, "nginx:1.27")
	from.UID = "uid-from"
	from.Spec.ImagesFrom = &warmv1.ImagesFrom{}
	from.Status.Resolved = &warmv1.ResolvedImages{Images: []string{"docker.io/library/app:v1", "docker.io/library/nginx:1.27"}, Hash: "0123456789abcdef"}
	// A status left from before imagesFrom was removed is ignored.
	stale := warm("a", "stale", nil, "redis:7")
	stale.Status.Resolved = &warmv1.ResolvedImages{Images: []string{"docker.io/library/old:v1"}, Hash: "fedcba9876543210"}
	var memo Memo
	d, _ := memo.Desired("", node, []warmv1.ImageWarm{from, stale}, nil)
	if got := fmt.Sprint(d.Keys()); got != "[docker.io/library/app:v1 docker.io/library/nginx:1.27 docker.io/library/redis:7]" {
		t.Fatalf("desired %s", got)
	}
	if n := d.images["docker.io/library/nginx:1.27"]; len(n.warms) != 1 {
		t.Errorf("nginx, in spec and resolved, wanted by %v: want a/from once", n.warms)
	}
	if d.warms[0].Name != "from" || d.warms[0].Resolved != "0123456789abcdef" || d.warms[1].Resolved != "" {
		t.Errorf("warms %+v: want from's hash echoed, none for stale", d.warms)
	}
	// The template moved to app:v2: same generation, new status.
	from.Status.Resolved = &warmv1.ResolvedImages{Images: []string{"docker.io/library/app:v2"}, Hash: "1111111111111111"}
	d, _ = memo.Desired("", node, []warmv1.ImageWarm{from}, nil)
	if got := fmt.Sprint(d.Keys()); got != "[docker.io/library/app:v2 docker.io/library/nginx:1.27]" {
		t.Errorf("after the set changed, desired %s", got)
	}
	if d.warms[0].Resolved != "1111111111111111" {
		t.Errorf("after the set changed, echoed %q", d.warms[0].Resolved)
	}
}

// BenchmarkDesired1000 measures the desired set of a node over 1,000
// ImageWarms of 10 images each, half of them matching.
// BenchmarkDesired1000 is the desired set over 1,000 ImageWarms of ten
// images each, half matching, in the agent's steady state: the specs were
// parsed by an earlier pass.
func BenchmarkDesired1000(b *testing.B) {
	warms, node := desiredBenchInput()
	var memo Memo
	memo.Desired("", node, warms, nil)
	b.ReportAllocs()
	for b.Loop() {
		d, _ := memo.Desired("", node, warms, nil)
		if len(d.images) == 0 {
			b.Fatal("nothing desired")
		}
	}
}

// BenchmarkDesired1000Cold is the same with every spec parsed again: an
// agent's first pass, or one after every ImageWarm changed.
func BenchmarkDesired1000Cold(b *testing.B) {
	warms, node := desiredBenchInput()
	b.ReportAllocs()
	for b.Loop() {
		d, _ := desiredImages("", node, warms)
		if len(d.images) == 0 {
			b.Fatal("nothing desired")
		}
	}
}

func desiredBenchInput() ([]warmv1.ImageWarm, map[string]string) {
	warms := make([]warmv1.ImageWarm, 1000)
	for i := range warms {
		pool := warmv1.LabelValue("web")
		if i%2 == 1 {
			pool = "batch"
		}
		var imgs []string
		for j := range 10 {
			imgs = append(imgs, fmt.Sprintf("registry.example:5000/team-%d/app-%d:v%d", i%50, j, i%7))
		}
		warms[i] = warm("ns", fmt.Sprintf("w%d", i), map[string]warmv1.LabelValue{"pool": pool}, imgs...)
		warms[i].Generation = 1 // as the API server sets it
		warms[i].UID = types.UID(fmt.Sprintf("uid-%d", i))
	}
	return warms, map[string]string{"pool": "web"}
}

// TestServedPerWarm gives each ImageWarm the starts served from the images
// it wants: once per image however many entries it has (one with a
// namespace's pull secrets, one without), for every ImageWarm that wants
// the image through an entry the image counts as present for, bounded by
// the API's maximum, and none to an ImageWarm whose images served none.
func TestServedPerWarm(t *testing.T) {
	secret := warm("b", "private", nil, "nginx:1.27")
	secret.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	d, _ := desiredImages("n", nil, []warmv1.ImageWarm{
		warm("a", "web", nil, "nginx:1.27", "redis:7"),
		secret,
		warm("c", "db", nil, "postgres:16"),
		warm("d", "many", nil, "busybox:1.36"),
	})
	byImage := map[string]int{
		"docker.io/library/nginx:1.27":   3,
		"docker.io/library/redis:7":      2,
		"docker.io/library/busybox:1.36": 5_000_000,
	}
	present := map[string]bool{}
	for _, key := range d.Keys() {
		present[key] = true
	}
	check := func(got []warmv1.WarmRef, want map[string]int32) {
		t.Helper()
		for _, w := range got {
			if k := w.Namespace + "/" + w.Name; w.ServedStarts != want[k] {
				t.Errorf("%s: servedStarts %d, want %d", k, w.ServedStarts, want[k])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d warms, want %d", len(got), len(want))
		}
	}
	check(servedPerWarm(d, byImage, present), map[string]int32{"a/web": 5, "b/private": 3, "c/db": 0, "d/many": maxServedPerWarm})
	// b's entry has not proved access: b counts none of nginx's starts.
	present["docker.io/library/nginx:1.27 b"] = false
	check(servedPerWarm(d, byImage, present), map[string]int32{"a/web": 5, "b/private": 0, "c/db": 0, "d/many": maxServedPerWarm})
	for _, w := range d.warms {
		if w.ServedStarts != 0 {
			t.Errorf("the desired set's own warms were changed: %+v", w)
		}
	}
}

// TestDesiredControlPlane checks that a control-plane node wants only the
// images of ImageWarms whose selector names its role: one with no
// selector, or one about other labels, reaches the workers alone.
func TestDesiredControlPlane(t *testing.T) {
	all := warm("a", "all", nil, "nginx:1.27")
	linux := warm("a", "linux", map[string]warmv1.LabelValue{"kubernetes.io/os": "linux"}, "redis:7")
	named := warm("ops", "cp", map[string]warmv1.LabelValue{"node-role.kubernetes.io/control-plane": ""}, "etcd:3.5")
	warms := []warmv1.ImageWarm{all, linux, named}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"worker", map[string]string{"kubernetes.io/os": "linux"},
			"[docker.io/library/nginx:1.27 docker.io/library/redis:7]"},
		{"control-plane", map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""},
			"[docker.io/library/etcd:3.5]"},
		{"master", map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/master": ""}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, bad := desiredImages("n", tc.labels, warms)
			if len(bad) != 0 {
				t.Fatalf("bad selectors: %v", bad)
			}
			if got := fmt.Sprint(d.Keys()); got != tc.want {
				t.Errorf("desired %s, want %s", got, tc.want)
			}
		})
	}
}
